"""A failure of a herd.torch helper on one rank raises on every rank, under mpirun.

broadcast_object, allgather_object, broadcast_parameters and
broadcast_optimizer_state run Python code between their collectives; when
that code fails on some ranks, those ranks must raise their own exception and
every other rank herd.Error naming them and their error, instead of waiting
for a collective the failed ranks never submit.

Each failing call runs under a watchdog (faulthandler: past WATCHDOG_SECONDS
the process prints its stacks and exits, failing the test) and is timed. Each
rank writes what it saw (exception type, message, seconds) to a file in a
folder shared by the ranks; after a barrier every rank reads every rank's
record and compares it with what that rank must have seen: the failing
rank's original exception (as plain pickle or torch raise it here, without
herd) and, on the others, a message built from the failing ranks' records.
Every test then repeats the call without the fault and checks exact results,
so the job is still usable after the failure.
"""

import contextlib
import faulthandler
import json
import os
import shutil
import tempfile
import threading
import time

import cloudpickle
import pytest
import torch

import herd
import herd.torch as hvd

# Generous: the machine running the tests may be busy; a hang is what must not happen.
RAISES_WITHIN_SECONDS = 60
WATCHDOG_SECONDS = 150
PATH_BYTES = 512


@pytest.fixture
def shared_dir(rank):
    """A folder every rank sees: rank 0 makes it and broadcasts its path."""
    path = torch.zeros(PATH_BYTES, dtype=torch.uint8)
    if rank == 0:
        made = tempfile.mkdtemp(prefix="herd-helper-failures-").encode()
        path[:len(made)] = torch.tensor(list(made), dtype=torch.uint8)
    hvd.broadcast_(path, 0, name="test.shared_dir")
    folder = bytes(path.tolist()).rstrip(b"\0").decode()
    yield folder
    hvd.barrier()
    if rank == 0:
        shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_SECONDS, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def record_failure(folder, call):
    """Runs ``call``, which must raise; writes this rank's record and returns every rank's
    records (a list indexed by rank) once every rank has written its own."""
    start = time.monotonic()
    seen = {"type": None, "is_herd_error": False, "message": "returned without raising"}
    with watchdog():
        try:
            call()
        except Exception as error:  # noqa: BLE001 -- what was raised is the record
            seen = {"type": type(error).__name__, "module": type(error).__module__,
                    "is_herd_error": isinstance(error, herd.Error),
                    "message": str(error)}
    seen["seconds"] = time.monotonic() - start
    with open(os.path.join(folder, f"rank{herd.rank()}.json"), "w") as file:
        json.dump(seen, file)
    hvd.barrier()
    records = []
    for r in range(herd.size()):
        with open(os.path.join(folder, f"rank{r}.json")) as file:
            records.append(json.load(file))
    return records


def pickle_failure(obj):
    """(type name, text) of the exception cloudpickle raises for ``obj``."""
    try:
        cloudpickle.dumps(obj)
    except Exception as error:  # noqa: BLE001
        return type(error).__name__, str(error)
    raise AssertionError(f"{obj!r} pickles")


def check_records(records, failing, own_failure, peer_message):
    """``failing``: the ranks that failed; ``own_failure(r)``: (type, text) rank r must
    raise itself; ``peer_message(records)``: the herd.Error message every other rank must
    show."""
    for r, seen in enumerate(records):
        assert seen["seconds"] < RAISES_WITHIN_SECONDS, f"rank {r} took {seen['seconds']} s"
        if r in failing:
            assert (seen["type"], seen["message"]) == own_failure(r), f"rank {r}: {seen}"
            assert not seen["is_herd_error"], f"rank {r}: {seen}"
        else:
            assert seen["is_herd_error"] and seen["type"] == "Error", f"rank {r}: {seen}"
            assert seen["message"] == peer_message(records), f"rank {r}: {seen}"


def failed_ranks_text(records, failing):
    return "; ".join(f"rank {r} failed: {records[r]['type']}: {records[r]['message']}"
                     for r in sorted(failing))


# --------------------------------------------------------------------------
# broadcast_object
# --------------------------------------------------------------------------

UNPICKLABLE = {
    "generator": lambda: {"weights": [1, 2], "rule": (x + 1 for x in range(3))},
    "lock": lambda: {"weights": [1, 2], "lock": threading.Lock()},
}


@pytest.mark.parametrize("kind", sorted(UNPICKLABLE))
def test_broadcast_object_that_does_not_pickle_raises_on_every_rank(kind, shared_dir, rank,
                                                                    size):
    root = size - 1
    obj = UNPICKLABLE[kind]() if rank == root else None
    records = record_failure(shared_dir, lambda: hvd.broadcast_object(obj, root, name="cfg"))
    if rank == root:  # its error is cloudpickle's for the same object (only the root holds
        # the object, so only it can compute that; the others compare with its record)
        assert (records[root]["type"], records[root]["message"]) == pickle_failure(obj)
    check_records(records, {root}, lambda r: (records[r]["type"], records[r]["message"]),
                  lambda recs: f"herd.torch.broadcast_object 'cfg', pickle: "
                               f"{failed_ranks_text(recs, {root})}")
    # The same call with a picklable object: the root's value on every rank.
    good = {"weights": [rank, 2 * rank], "rule": "x + 1"}
    assert hvd.broadcast_object(good, root, name="cfg") == {"weights": [root, 2 * root],
                                                             "rule": "x + 1"}


def _rebuild_unless_on(rank_that_fails, value):
    """Unpickles to ``value`` except on ``rank_that_fails``."""
    if herd.rank() == rank_that_fails:
        raise LookupError(f"no decoder for {value!r} here")
    return value


class FailsToUnpickleOn:
    """Pickles fine everywhere; unpickling raises on one rank only."""

    def __init__(self, rank_that_fails, value):
        self.rank_that_fails, self.value = rank_that_fails, value

    def __reduce__(self):
        return _rebuild_unless_on, (self.rank_that_fails, self.value)


def test_broadcast_object_that_does_not_unpickle_on_one_rank(shared_dir, rank, size):
    root, bad = 0, 1
    obj = FailsToUnpickleOn(bad, "payload") if rank == root else None
    records = record_failure(shared_dir, lambda: hvd.broadcast_object(obj, root, name="odd"))
    check_records(records, {bad}, lambda r: ("LookupError", "no decoder for 'payload' here"),
                  lambda recs: f"herd.torch.broadcast_object 'odd', receive: "
                               f"{failed_ranks_text(recs, {bad})}")
    good = FailsToUnpickleOn(size, "payload") if rank == root else None  # fails nowhere
    assert hvd.broadcast_object(good, root, name="odd") == (good if rank == root else "payload")


# --------------------------------------------------------------------------
# allgather_object
# --------------------------------------------------------------------------

@pytest.mark.parametrize("failing_ranks", ["one", "all_but_0"])
def test_allgather_object_that_does_not_pickle_on_some_ranks(failing_ranks, shared_dir, rank,
                                                            size):
    failing = {1} if failing_ranks == "one" else set(range(1, size))
    obj = {"rank": rank, "lock": threading.Lock()} if rank in failing else {"rank": rank}
    records = record_failure(shared_dir, lambda: hvd.allgather_object(obj, name="stats"))
    lock_failure = pickle_failure(threading.Lock())
    check_records(records, failing, lambda r: lock_failure,
                  lambda recs: f"herd.torch.allgather_object 'stats', pickle: "
                               f"{failed_ranks_text(recs, failing)}")
    expected = [{"rank": r} for r in range(size)]
    assert hvd.allgather_object({"rank": rank}, name="stats") == expected


def test_allgather_object_that_does_not_unpickle_on_one_rank(shared_dir, rank, size):
    bad = size - 1
    obj = FailsToUnpickleOn(bad, f"from {rank}")
    records = record_failure(shared_dir, lambda: hvd.allgather_object(obj, name="odd"))
    # Rank ``bad`` fails on the first object it unpickles: rank 0's.
    check_records(records, {bad}, lambda r: ("LookupError", "no decoder for 'from 0' here"),
                  lambda recs: f"herd.torch.allgather_object 'odd', receive: "
                               f"{failed_ranks_text(recs, {bad})}")
    assert hvd.allgather_object(FailsToUnpickleOn(size, f"from {rank}"), name="odd") == [
        f"from {r}" for r in range(size)]


# --------------------------------------------------------------------------
# broadcast_parameters
# --------------------------------------------------------------------------

def model_state(seed):
    torch.manual_seed(seed)
    return torch.nn.Linear(3, 2).state_dict()


def test_broadcast_parameters_with_a_refused_tensor_on_one_rank(shared_dir, rank, size):
    root, bad = 0, size - 1
    state = model_state(rank)
    if rank == bad:
        state["bias"] = torch.zeros(2, dtype=torch.complex64)  # no herd dtype
    records = record_failure(shared_dir, lambda: hvd.broadcast_parameters(state, root))
    refusal = records[bad]["message"]
    assert records[bad]["type"] == "ValueError" and refusal.startswith(
        "herd.torch.broadcast_parameters: torch.complex64 tensors are not supported"), refusal
    check_records(records, {bad}, lambda r: ("ValueError", refusal),
                  lambda recs: f"herd.torch.broadcast_parameters 'broadcast_parameters', check: "
                               f"{failed_ranks_text(recs, {bad})}")

    state = model_state(rank)
    hvd.broadcast_parameters(state, root)
    for key, value in model_state(root).items():
        assert torch.equal(state[key], value), key


def test_broadcast_parameters_with_a_missing_tensor_on_one_rank(shared_dir, rank, size):
    """Ranks giving different numbers of tensors would wait for names never sent: every rank
    raises instead, naming each rank's count."""
    root, bad = 0, 1
    state = model_state(rank)
    if rank == bad:
        del state["bias"]
    records = record_failure(shared_dir, lambda: hvd.broadcast_parameters(state, root))
    counts = ", ".join(f"rank {r} {1 if r == bad else 2}" for r in range(size))
    message = (f"herd.torch.broadcast_parameters: the ranks hold different numbers of tensors "
               f"({counts}); every rank must pass the same model's")
    check_records(records, set(), None, lambda recs: message)


# --------------------------------------------------------------------------
# broadcast_optimizer_state
# --------------------------------------------------------------------------

def sgd_model(seed):
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 1))
    return model


def test_broadcast_optimizer_state_refused_on_one_rank(shared_dir, rank, size):
    root, bad = 0, 1
    model = sgd_model(rank)
    if rank == bad:
        optimizer = torch.optim.LBFGS(model.parameters())
    else:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    records = record_failure(shared_dir,
                             lambda: hvd.broadcast_optimizer_state(optimizer, root))
    refusal = ("ValueError", "herd.torch.broadcast_optimizer_state: cannot broadcast "
               "torch.optim.LBFGS state (deeply nested, with None entries)")
    check_records(records, {bad}, lambda r: refusal,
                  lambda recs: "herd.torch.broadcast_optimizer_state 'optimizer_state', "
                               f"collect: {failed_ranks_text(recs, {bad})}")


def two_groups(model, seed):
    return torch.optim.SGD([{"params": model[0].parameters()},
                            {"params": model[1].parameters(), "lr": 0.5 + seed}],
                           lr=0.1 + seed, momentum=0.9)


def one_group(model, seed):
    return torch.optim.SGD(model.parameters(), lr=0.1 + seed, momentum=0.9)


def test_broadcast_optimizer_state_that_does_not_apply_on_some_ranks(shared_dir, rank, size):
    """The root's optimizer has two parameter groups, the others one: the root's
    hyper-parameters of its second group have nowhere to go there."""
    root = 0
    model = sgd_model(rank)
    optimizer = two_groups(model, rank) if rank == root else one_group(model, rank)
    records = record_failure(shared_dir,
                             lambda: hvd.broadcast_optimizer_state(optimizer, root))
    failing = set(range(1, size))
    check_records(records, failing, lambda r: ("IndexError", "list index out of range"),
                  lambda recs: "herd.torch.broadcast_object 'optimizer_state.scalars', "
                               f"receive: {failed_ranks_text(recs, failing)}")

    # Without the fault: every rank's state and hyper-parameters are the root's.
    model = sgd_model(rank)
    optimizer = two_groups(model, rank)
    for p in model.parameters():
        p.grad = torch.full_like(p, float(rank + 1))
    optimizer.step()
    hvd.broadcast_optimizer_state(optimizer, root)
    expected_model = sgd_model(root)
    expected = two_groups(expected_model, root)
    for p in expected_model.parameters():
        p.grad = torch.full_like(p, float(root + 1))
    expected.step()
    for group, want in zip(optimizer.param_groups, expected.param_groups):
        assert group["lr"] == want["lr"]
        for p, q in zip(group["params"], want["params"]):
            assert torch.equal(optimizer.state[p]["momentum_buffer"],
                               expected.state[q]["momentum_buffer"])


# --------------------------------------------------------------------------
# DistributedOptimizer: a submission that fails in Python on one rank
# --------------------------------------------------------------------------

class CodecMissingOn:
    """A compression (no-op) that raises on one rank for 3-element gradients."""

    def __init__(self, rank_that_fails):
        self.rank_that_fails = rank_that_fails

    def compress(self, tensor):
        if herd.rank() == self.rank_that_fails and tensor.numel() == 3:
            raise RuntimeError("no codec for 3-element gradients here")
        return tensor, None

    def decompress(self, tensor, _):
        return tensor


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "grouped"])
def test_optimizer_submission_failing_on_one_rank(grouped, shared_dir, rank, size):
    """``unused`` takes no part in the loss, so its zero gradient is submitted in step(),
    where the compression fails on one rank: every rank raises, within the bound."""
    bad = size - 1
    used = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    unused = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD([used, unused], lr=1.0),
        named_parameters=[("used", used), ("unused", unused)],
        compression=CodecMissingOn(bad), groups=[[used, unused]] if grouped else None)
    ((rank + 1) * used.sum()).backward()
    records = record_failure(shared_dir, optimizer.step)
    check_records(records, {bad},
                  lambda r: ("RuntimeError", "no codec for 3-element gradients here"),
                  lambda recs: "herd.torch.DistributedOptimizer.synchronize "
                               "'DistributedOptimizer.gradients', submit: "
                               f"{failed_ranks_text(recs, {bad})}")

    # Without the fault, the same step averages the gradients exactly: (r + 1) over r.
    del optimizer
    used.grad, unused.grad = None, None
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD([used, unused], lr=1.0),
        named_parameters=[("used", used), ("unused", unused)],
        compression=CodecMissingOn(size), groups=[[used, unused]] if grouped else None)
    ((rank + 1) * used.sum()).backward()
    optimizer.step()
    assert torch.equal(used.detach(), torch.full((2,), -(size + 1) / 2, dtype=torch.float64))
    assert torch.equal(unused.detach(), torch.zeros(3, dtype=torch.float64))


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "grouped"])
def test_optimizer_submission_failing_in_a_hook_on_one_rank(grouped, shared_dir, rank, size):
    """The 3-element parameter's gradient is ready during backward, where its hook's
    compression fails on one rank: backward completes there, and step() raises on every
    rank."""
    bad = 0
    first = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    second = torch.nn.Parameter(torch.zeros(3, dtype=torch.float64))
    named = [("first", first), ("second", second)]
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD([first, second], lr=1.0), named_parameters=named,
        compression=CodecMissingOn(bad), groups=[[first, second]] if grouped else None)
    ((rank + 1) * (first.sum() + second.sum())).backward()  # raises on no rank
    records = record_failure(shared_dir, optimizer.step)
    check_records(records, {bad},
                  lambda r: ("RuntimeError", "no codec for 3-element gradients here"),
                  lambda recs: "herd.torch.DistributedOptimizer.synchronize "
                               "'DistributedOptimizer.gradients', submit: "
                               f"{failed_ranks_text(recs, {bad})}")
    # The same optimizer, the fault gone: the next step reduces exactly.
    optimizer._compression = CodecMissingOn(size)
    first.grad, second.grad = None, None
    ((rank + 1) * (first.sum() + second.sum())).backward()
    optimizer.step()
    for p in (first, second):
        assert torch.equal(p.detach(), torch.full(p.shape, -(size + 1) / 2,
                                                  dtype=torch.float64))


class SGDFailingOn(torch.optim.SGD):
    """torch.optim.SGD whose step raises on one rank while ``failing`` is set."""

    def __init__(self, params, rank_that_fails, **options):
        super().__init__(params, **options)
        self.rank_that_fails = rank_that_fails
        self.failing = True

    def step(self, closure=None):
        if self.failing and herd.rank() == self.rank_that_fails:
            raise ValueError("the update diverged here")
        return super().step(closure)


def test_wrapped_optimizer_step_failing_on_one_rank(shared_dir, rank, size):
    """The wrapped optimizer's own step raises on one rank after the gradients were
    reduced: that rank raises at once, the others step; in the next step every rank
    raises, the failed rank saying its parameters differ and the others naming it."""
    bad = size - 1
    weight = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    optimizer = hvd.DistributedOptimizer(SGDFailingOn([weight], bad, lr=1.0),
                                         named_parameters=[("weight", weight)])
    ((rank + 1) * weight.sum()).backward()
    if rank == bad:
        with pytest.raises(ValueError, match="the update diverged here"):
            optimizer.step()
    else:
        optimizer.step()
    optimizer.failing = False
    optimizer.zero_grad()
    ((rank + 1) * weight.sum()).backward()
    records = record_failure(shared_dir, optimizer.step)
    check_records(records, {bad},
                  lambda r: ("RuntimeError",
                             "the wrapped optimizer's step() failed on this rank in the "
                             "previous step (ValueError: the update diverged here), so this "
                             "rank's parameters differ from the other ranks'"),
                  lambda recs: "herd.torch.DistributedOptimizer.synchronize "
                               "'DistributedOptimizer.gradients', submit: "
                               f"{failed_ranks_text(recs, {bad})}")
    # Told once: the next step reduces and applies on every rank. The failed rank missed
    # the first update (the mean gradient, (size + 1) / 2); nobody applied the second.
    optimizer.zero_grad()
    ((rank + 1) * weight.sum()).backward()
    optimizer.step()
    mean = (size + 1) / 2
    want = -mean if rank == bad else -2 * mean
    assert torch.equal(weight.detach(), torch.full((2,), want, dtype=torch.float64))


def test_optimizer_groups_over_different_parameters_on_one_rank(shared_dir, rank, size):
    """With groups the ranks agree on the root's parameter order first; a rank whose model
    has another parameter fails there, and every rank raises."""
    bad = 1
    params = [("a", torch.nn.Parameter(torch.zeros(2))), ("b", torch.nn.Parameter(torch.zeros(3)))]
    if rank == bad:
        params.append(("extra", torch.nn.Parameter(torch.zeros(1))))
    records = record_failure(shared_dir, lambda: hvd.DistributedOptimizer(
        torch.optim.SGD([p for _, p in params], lr=1.0), named_parameters=params, groups=1))
    own = ("ValueError", "DistributedOptimizer: the ranks' trainable parameters differ (rank 0 "
           "has 2, this rank 3; names not on rank 0: ['extra']); every rank must build the same "
           "model")
    check_records(records, {bad}, lambda r: own,
                  lambda recs: "herd.torch.broadcast_object 'DistributedOptimizer.parameter_order'"
                               f", receive: {failed_ranks_text(recs, {bad})}")
    # The same model everywhere: one group of both, averaged exactly.
    params = params[:2]
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in params], lr=1.0),
                                         named_parameters=params, groups=1)
    ((rank + 1) * (params[0][1].sum() + params[1][1].sum())).backward()
    optimizer.step()
    for _, p in params:
        assert torch.equal(p.detach(), torch.full(p.shape, -(size + 1) / 2))


def test_broadcast_object_default_name_with_none_elsewhere(rank, size):
    """The usual call: the object on the root, None elsewhere (different types, same
    default name)."""
    root = size - 1
    obj = {"epoch": 7, "best": 0.25} if rank == root else None
    assert hvd.broadcast_object(obj, root) == {"epoch": 7, "best": 0.25}
    mixed = "text" if rank % 2 else rank
    assert hvd.allgather_object(mixed) == ["text" if r % 2 else r for r in range(size)]


def test_optimizer_sparse_submission_refused_on_one_rank(shared_dir, rank, size, monkeypatch):
    """A sparse gradient (set by hand, so step() submits it) whose sparse allreduce is
    refused on one rank: the stand-in gathers rows of another width, and every rank
    raises."""
    bad = 0
    weight = torch.nn.Parameter(torch.zeros(4, 2, dtype=torch.float64))

    def sparse_gradient():
        row = rank % 4
        return torch.sparse_coo_tensor([[row]], torch.full((1, 2), float(rank + 1),
                                                           dtype=torch.float64), (4, 2))

    submissions = []
    real_sparse_allreduce_async = herd.torch.optimizer.sparse_allreduce_async

    def refuses_the_first(tensor, name, op, process_set=hvd.global_process_set):
        submissions.append((name, tensor.sparse_dim(), tensor.dim()))
        if len(submissions) == 1:
            raise RuntimeError(f"sparse allreduce of {name} refused here")
        return real_sparse_allreduce_async(tensor, name, op, process_set=process_set)

    if rank == bad:
        monkeypatch.setattr(herd.torch.optimizer, "sparse_allreduce_async", refuses_the_first)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([weight], lr=1.0),
                                         named_parameters=[("embedding", weight)])
    weight.grad = sparse_gradient()
    records = record_failure(shared_dir, optimizer.step)
    check_records(records, {bad}, lambda r: ("RuntimeError",
                                             "sparse allreduce of embedding refused here"),
                  lambda recs: "herd.torch.DistributedOptimizer.synchronize "
                               "'DistributedOptimizer.gradients', submit: "
                               f"{failed_ranks_text(recs, {bad})}")
    if rank == bad:
        # The refused gradient, then the stand-in: one sparse and one dense dimension more.
        assert submissions == [("embedding", 1, 2), ("embedding", 2, 4)]
    monkeypatch.undo()

    # Without the fault: the average of the ranks' sparse gradients, applied once.
    weight.grad = sparse_gradient()
    optimizer.step()
    expected = torch.zeros(4, 2, dtype=torch.float64)
    for r in range(size):
        expected[r % 4] -= (r + 1) / size
    assert torch.equal(weight.detach(), expected)


def test_broadcast_object_from_a_root_outside_the_job(rank, size):
    """No rank pickles (none is the root), and the broadcast refuses the root on every
    rank at the call."""
    with watchdog(), pytest.raises(herd.Error, match=f"root {size + 1} is not a rank of this "
                                                     f"job \\(size {size}\\)"):
        hvd.broadcast_object({"rank": rank}, root_rank=size + 1, name="nowhere")
    assert hvd.broadcast_object({"rank": rank}, root_rank=0, name="nowhere") == {"rank": 0}


def outside_the_set():
    """What rank 0 records: it makes no call (record_failure wants one that raises)."""
    raise LookupError("not a member")


def test_allgather_object_in_a_process_set_names_global_ranks(shared_dir, rank, size):
    """In a set of the ranks but 0, the failing member is named by its global rank; rank 0,
    outside the set, takes no part."""
    members = list(range(1, size))
    bad = size - 1
    subset = hvd.add_process_set(members)
    try:
        if rank in members:
            obj = threading.Lock() if rank == bad else rank
            records = record_failure(
                shared_dir, lambda: hvd.allgather_object(obj, name="set", process_set=subset))
        else:
            records = record_failure(shared_dir, outside_the_set)
        lock_failure = pickle_failure(threading.Lock())
        for r in members:
            seen = records[r]
            if r == bad:
                assert (seen["type"], seen["message"]) == lock_failure, seen
            else:
                assert seen["is_herd_error"] and seen["message"] == (
                    f"herd.torch.allgather_object 'set', pickle: rank {bad} failed: "
                    f"{lock_failure[0]}: {lock_failure[1]}"), seen
        if rank in members:
            assert hvd.allgather_object(rank, name="set", process_set=subset) == members
    finally:
        hvd.remove_process_set(subset)


def test_optimizer_gradient_of_another_shape_on_one_rank(shared_dir, rank, size):
    """One rank's parameter, so its gradient, has another shape (torch refuses a gradient
    of another shape than its parameter's): herd's negotiation fails the reduction on every
    rank alike, the status exchange that follows finds no Python failure, and every rank
    raises that disagreement as it is."""
    bad = size - 1
    weight = torch.nn.Parameter(torch.zeros(3 if rank == bad else 2, dtype=torch.float64))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([weight], lr=1.0),
                                         named_parameters=[("w", weight)])
    weight.sum().backward()
    records = record_failure(shared_dir, optimizer.step)
    shapes = ", ".join(f"rank {r} [{3 if r == bad else 2}]" for r in range(size))
    check_records(records, set(), None,
                  lambda recs: f"allreduce 'allreduce.w': shape mismatch: {shapes}")
