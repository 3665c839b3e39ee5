"""op=Adasum in herd.torch and herd.numpy, and DistributedOptimizer(op=Adasum), under mpirun.

The expected values come from a NumPy reference of the Adasum rule written here, in
float64: the ranks' vectors combine pairwise in rank order (adasum(adasum(v0, v1),
adasum(v2, v3)) on 4 ranks), each tensor with its own dot product and norms. Every
rank's inputs come from a generator seeded with the rank, so every rank computes every
other rank's inputs and the whole reference. Tolerances are Horovod's: the error's norm
at most 100 machine epsilons of the dtype times the reference's norm.

Runs at 2, 3 and 4 ranks (tests/python/CMakeLists.txt). At a size that is not a power
of two, every Adasum call must raise herd.UnsupportedError on every rank, naming the
size, and the next collective must work.
"""

import functools

import numpy as np
import pytest
import torch

import herd
import herd.numpy as hnp
import herd.torch as hvd
from rank_checks import expect


def power_of_two(n):
    return n >= 1 and n & (n - 1) == 0


def needs_power_of_two(test):
    """Skips ``test`` (which takes the ``size`` fixture) unless the job's size is a power of
    two; decided when it runs, since herd starts after collection."""
    @functools.wraps(test)
    def run(*args, **kwargs):
        if not power_of_two(herd.size()):
            pytest.skip("Adasum runs on a power-of-two number of ranks")
        return test(*args, **kwargs)
    return run


def skip_unless(condition, reason):
    if not condition:
        pytest.skip(reason)


# --------------------------------------------------------------------------
# The reference
# --------------------------------------------------------------------------

def adasum_pair(a, b):
    dot = float(np.dot(a, b))
    a2 = float(np.dot(a, a))
    b2 = float(np.dot(b, b))
    tiny = np.sqrt(np.finfo(np.float64).tiny)
    ca = 1.0 - dot / (2.0 * a2) if a2 >= tiny else 1.0
    cb = 1.0 - dot / (2.0 * b2) if b2 >= tiny else 1.0
    return ca * a + cb * b


def adasum_reference(vectors):
    """The ranks' vectors (float64, in rank order) combined as a binary tree."""
    if len(vectors) == 1:
        return vectors[0]
    half = len(vectors) // 2
    return adasum_pair(adasum_reference(vectors[:half]), adasum_reference(vectors[half:]))


def rank_input(rank, seed, shape, dtype):
    """Rank ``rank``'s input: normal values whose scale differs by rank."""
    rng = np.random.default_rng(1000 * seed + rank)
    return (rng.standard_normal(shape) * (1.0 + 0.5 * rank)).astype(dtype)


def expected_for(seed, shape, dtype, members):
    """The reference of the members' inputs (as the dtype rounds them), reshaped."""
    vectors = [rank_input(r, seed, shape, dtype).astype(np.float64).reshape(-1) for r in members]
    return adasum_reference(vectors).reshape(shape)


def check_close(actual, expected, dtype, what):
    actual = np.asarray(actual, dtype=np.float64)
    error = np.linalg.norm(actual - expected)
    bound = 100 * np.finfo(dtype).eps * np.linalg.norm(expected)
    expect(error <= bound, f"{what}: error {error:.3g} above {bound:.3g}")


def check_same_on_every_rank(tensor, what):
    gathered = hvd.allgather(tensor.reshape(1, -1))
    expect(all(torch.equal(gathered[0], row) for row in gathered),
           f"{what}: the ranks' results differ")


DTYPES = [np.float64, np.float32, np.float16]
TORCH_DTYPE = {np.float64: torch.float64, np.float32: torch.float32, np.float16: torch.float16}
SHAPES = [(1,), (3,), (1001,), (17, 5), (0,)]


def still_works(rank, size, what):
    got = hvd.allreduce(torch.tensor([float(rank + 1)]), op=hvd.Sum, name=f"after.{what}")
    expect(got.item() == size * (size + 1) / 2, f"after {what}: got {got.item()}")


# --------------------------------------------------------------------------
# herd.torch allreduce
# --------------------------------------------------------------------------

@needs_power_of_two
@pytest.mark.parametrize("dtype", DTYPES)
def test_torch_allreduce_matches_the_reference(rank, size, dtype):
    for seed, shape in enumerate(SHAPES):
        x = torch.from_numpy(rank_input(rank, seed, shape, dtype))
        result = hvd.allreduce(x, op=hvd.Adasum, name=f"adasum.{dtype.__name__}.{seed}")
        expect(result.dtype == x.dtype and tuple(result.shape) == shape,
               f"{shape}: got {result.dtype} {tuple(result.shape)}")
        check_close(result.numpy(), expected_for(seed, shape, dtype, range(size)), dtype,
                    f"{dtype.__name__} {shape}")
        check_same_on_every_rank(result, f"{dtype.__name__} {shape}")
        # The input is left as it was.
        expect(np.array_equal(x.numpy(), rank_input(rank, seed, shape, dtype)),
               f"{shape}: the input changed")


@needs_power_of_two
def test_torch_in_place_and_async(rank, size):
    x = torch.from_numpy(rank_input(rank, 7, (33,), np.float32))
    hvd.allreduce_(x, op=hvd.Adasum, name="adasum.inplace")
    check_close(x.numpy(), expected_for(7, (33,), np.float32, range(size)), np.float32,
                "allreduce_")
    # Non-contiguous: reduced through a contiguous copy and written back.
    y = torch.from_numpy(rank_input(rank, 8, (6, 4), np.float64)).t()
    handle = hvd.allreduce_async_(y, op=hvd.Adasum, name="adasum.strided")
    hvd.synchronize(handle)
    check_close(y.numpy(), expected_for(8, (6, 4), np.float64, range(size)).T, np.float64,
                "allreduce_async_ on a transposed tensor")


@needs_power_of_two
def test_closed_forms(rank, size):
    """Equal directions average, orthogonal ones add (Horovod's own checks)."""
    base = np.linspace(-1.0, 2.0, 50)
    parallel = torch.from_numpy(base * (rank + 1))
    got = hvd.allreduce(parallel, op=hvd.Adasum, name="adasum.parallel")
    check_close(got.numpy(), base * (size + 1) / 2.0, np.float64, "parallel vectors")
    orthogonal = torch.zeros(size * 3, dtype=torch.float64)
    orthogonal[rank * 3:(rank + 1) * 3] = float(rank + 1)
    got = hvd.allreduce(orthogonal, op=hvd.Adasum, name="adasum.orthogonal")
    expected = np.repeat(np.arange(1.0, size + 1.0), 3)
    check_close(got.numpy(), expected, np.float64, "orthogonal vectors")


@needs_power_of_two
def test_several_tensors_in_flight_each_with_its_own_coefficients(rank, size):
    """Submitted together, small tensors are fused into one buffer: each must still be
    combined with its own dot product and norms."""
    shapes = [(5,), (64,), (3, 3), (1,), (200,)]
    dtype = np.float32
    inputs = [torch.from_numpy(rank_input(rank, 20 + i, shape, dtype))
              for i, shape in enumerate(shapes)]
    # One tensor of parallel vectors among them: a shared coefficient would not average it.
    inputs.append(torch.from_numpy((np.arange(1.0, 9.0) * (rank + 1)).astype(dtype)))
    handles = [hvd.allreduce_async(t, op=hvd.Adasum, name=f"adasum.flight.{i}")
               for i, t in enumerate(inputs)]
    results = [hvd.synchronize(h) for h in handles]
    for i, shape in enumerate(shapes):
        check_close(results[i].numpy(), expected_for(20 + i, shape, dtype, range(size)), dtype,
                    f"tensor {i} {shape}")
    check_close(results[-1].numpy(), np.arange(1.0, 9.0) * (size + 1) / 2.0, dtype,
                "parallel tensor")


@needs_power_of_two
def test_grouped_allreduce(rank, size):
    shapes = [(10,), (4, 5), (1,)]
    tensors = [torch.from_numpy(rank_input(rank, 30 + i, s, np.float64))
               for i, s in enumerate(shapes)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Adasum, name="adasum.group")
    for i, shape in enumerate(shapes):
        check_close(results[i].numpy(), expected_for(30 + i, shape, np.float64, range(size)),
                    np.float64, f"group member {i}")


@needs_power_of_two
def test_gradient_is_the_adasum_of_the_gradients(rank, size):
    """Horovod's rule for allreduce's backward: the same operator on the incoming gradients."""
    x = torch.from_numpy(rank_input(rank, 42, (12,), np.float64)).requires_grad_()
    weights = torch.from_numpy(rank_input(rank, 43, (12,), np.float64))
    (hvd.allreduce(x, op=hvd.Adasum, name="adasum.grad") * weights).sum().backward()
    check_close(x.grad.numpy(), expected_for(43, (12,), np.float64, range(size)), np.float64,
                "gradient")


@needs_power_of_two
def test_prescale_and_postscale(rank, size):
    """Horovod's order: prescale the inputs, combine, postscale the result. Adasum commutes
    with a common scale, so the result is prescale * postscale * adasum(inputs)."""
    x = torch.from_numpy(rank_input(rank, 40, (25,), np.float64))
    got = hvd.allreduce(x, op=hvd.Adasum, prescale_factor=0.5, postscale_factor=3.0,
                        name="adasum.scaled")
    check_close(got.numpy(), 1.5 * expected_for(40, (25,), np.float64, range(size)),
                np.float64, "prescale 0.5, postscale 3")


def test_process_set_of_two(rank, size):
    skip_unless(size == 4, "forms a set of 2 of 4 ranks")
    pair = hvd.add_process_set([0, 1])
    try:
        if rank < 2:
            x = torch.from_numpy(rank_input(rank, 50, (11,), np.float32))
            got = hvd.allreduce(x, op=hvd.Adasum, process_set=pair, name="adasum.pair")
            check_close(got.numpy(), expected_for(50, (11,), np.float32, [0, 1]), np.float32,
                        "process set [0, 1]")
        hvd.barrier()
    finally:
        hvd.remove_process_set(pair)


@needs_power_of_two
def test_joined_ranks_contribute_zeros(rank, size):
    """Every rank but the last joins; the last one's vector meets zeros, which Adasum leaves
    unchanged, so it gets its own (prescaled) vector back."""
    last = size - 1
    if rank == last:
        mine = torch.from_numpy(rank_input(rank, 45, (9,), np.float64))
        got = hvd.allreduce(mine, op=hvd.Adasum, prescale_factor=2.0, name="adasum.joined")
        expect(torch.equal(got, 2.0 * mine), f"while joined: {got.tolist()}")
    assert hvd.join() == last
    still_works(rank, size, "join")


# --------------------------------------------------------------------------
# herd.numpy
# --------------------------------------------------------------------------

@needs_power_of_two
def test_numpy_allreduce_and_grouped(rank, size):
    x = rank_input(rank, 60, (40,), np.float32)
    got = hnp.allreduce(x, op=herd.Adasum, name="np.adasum")
    check_close(got, expected_for(60, (40,), np.float32, range(size)), np.float32, "numpy")
    arrays = [rank_input(rank, 61, (7,), np.float64), rank_input(rank, 62, (2, 9), np.float64)]
    got = hnp.grouped_allreduce(arrays, op=herd.Adasum, name="np.adasum.group")
    check_close(got[0], expected_for(61, (7,), np.float64, range(size)), np.float64, "np g0")
    check_close(got[1], expected_for(62, (2, 9), np.float64, range(size)), np.float64, "np g1")


# --------------------------------------------------------------------------
# Refusals
# --------------------------------------------------------------------------

def test_integer_tensors_are_refused_at_the_call(rank, size):
    for dtype in (torch.int32, torch.int64, torch.uint8):
        with pytest.raises(ValueError, match="Adasum reduces float16, float32 and float64"):
            hvd.allreduce(torch.ones(4, dtype=dtype), op=hvd.Adasum, name="adasum.int")
    with pytest.raises(herd.InvalidArgumentError, match="not bfloat16"):
        hvd.allreduce(torch.ones(4, dtype=torch.bfloat16), op=hvd.Adasum, name="adasum.bf16")
    with pytest.raises(ValueError, match="not int32"):
        hnp.allreduce(np.ones(3, dtype=np.int32), op=herd.Adasum, name="np.adasum.int")
    still_works(rank, size, "integers")


def test_reducescatter_refuses_adasum(rank, size):
    for call in (lambda: hvd.reducescatter(torch.ones(4, 2), op=hvd.Adasum),
                 lambda: hvd.grouped_reducescatter([torch.ones(4)], op=hvd.Adasum),
                 lambda: hnp.reducescatter(np.ones((4, 2)), op=herd.Adasum, name="np.rs")):
        with pytest.raises(RuntimeError, match="reducescatter does not take Adasum") as info:
            call()
        assert isinstance(info.value, herd.UnsupportedError)
    still_works(rank, size, "reducescatter")


def test_a_size_that_is_not_a_power_of_two_is_refused_on_every_rank(rank, size):
    skip_unless(not power_of_two(size), "checks a size that is not a power of two")
    expected = f"process set 0 has {size} ranks"
    calls = [
        lambda: hvd.allreduce(torch.ones(4), op=hvd.Adasum, name="adasum.odd"),
        lambda: hvd.allreduce_async_(torch.ones(4), op=hvd.Adasum, name="adasum.odd.async"),
        lambda: hvd.grouped_allreduce([torch.ones(2), torch.ones(3)], op=hvd.Adasum),
        lambda: hnp.allreduce(np.ones(4), op=herd.Adasum, name="np.adasum.odd"),
    ]
    for call in calls:
        with pytest.raises(herd.UnsupportedError, match="power of two") as info:
            call()
        assert expected in str(info.value)
        assert isinstance(info.value, NotImplementedError)
    still_works(rank, size, "odd size")


def test_a_process_set_of_three_is_refused_on_its_members(rank, size):
    skip_unless(size == 4, "forms a set of 3 of 4 ranks")
    three = hvd.add_process_set([0, 1, 2])
    try:
        if rank < 3:
            with pytest.raises(herd.UnsupportedError, match="has 3 ranks"):
                hvd.allreduce(torch.ones(4), op=hvd.Adasum, process_set=three)
            got = hvd.allreduce(torch.ones(2), op=hvd.Sum, process_set=three)
            expect(got.tolist() == [3.0, 3.0], f"sum over the set of 3: {got.tolist()}")
        hvd.barrier()
    finally:
        hvd.remove_process_set(three)


# --------------------------------------------------------------------------
# DistributedOptimizer(op=Adasum)
# --------------------------------------------------------------------------

class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(5)
        self.fc1 = torch.nn.Linear(6, 4)
        self.fc2 = torch.nn.Linear(4, 2)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def batch(rank, step):
    rng = np.random.default_rng(7000 + 100 * step + rank)
    return (torch.from_numpy(rng.standard_normal((8, 6)).astype(np.float32)),
            torch.from_numpy(rng.standard_normal((8, 2)).astype(np.float32)))


def make_sgd(model):
    return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)


def simulate_adasum_training(size, steps, passes):
    """Every rank's optimizer run side by side: each takes its local step from the shared
    parameters, and the parameters move by the Adasum of the ranks' changes."""
    models = [Net() for _ in range(size)]
    optimizers = [make_sgd(m) for m in models]
    for step in range(steps):
        changes = []
        for r, (model, optimizer) in enumerate(zip(models, optimizers)):
            optimizer.zero_grad()
            for p in range(passes):
                x, y = batch(r, step * passes + p)
                torch.nn.functional.mse_loss(model(x), y).backward()
            start = [p.detach().clone() for p in model.parameters()]
            optimizer.step()
            changes.append([(p.detach() - s).double().numpy().reshape(-1)
                            for p, s in zip(model.parameters(), start)])
            with torch.no_grad():
                for p, s in zip(model.parameters(), start):
                    p.copy_(s)
        for index in range(len(changes[0])):
            combined = adasum_reference([changes[r][index] for r in range(size)])
            for model in models:
                p = list(model.parameters())[index]
                with torch.no_grad():
                    p.add_(torch.from_numpy(combined.reshape(p.shape)).to(p.dtype))
    return models[0]


@needs_power_of_two
@pytest.mark.parametrize("passes", [1, 2])
def test_distributed_optimizer_with_adasum(rank, size, passes):
    model = Net()
    optimizer = hvd.DistributedOptimizer(make_sgd(model),
                                         named_parameters=model.named_parameters(),
                                         op=hvd.Adasum, backward_passes_per_step=passes)
    assert isinstance(optimizer, torch.optim.SGD)
    # A Horovod script's start; every rank already holds the same model and empty state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)
    steps = 3
    for step in range(steps):
        optimizer.zero_grad()
        for p in range(passes):
            x, y = batch(rank, step * passes + p)
            torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    reference = simulate_adasum_training(size, steps, passes)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        check_close(p.detach().numpy(), q.detach().double().numpy(), np.float32, name)
        check_same_on_every_rank(p.detach(), name)


@needs_power_of_two
def test_adasum_optimizer_misuse(rank, size):
    model = Net()
    optimizer = hvd.DistributedOptimizer(make_sgd(model), op=hvd.Adasum)
    with pytest.raises(AssertionError, match="skip_synchronize"):
        with optimizer.skip_synchronize():
            pass
    x, y = batch(rank, 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        optimizer.zero_grad()
    optimizer.step()
    optimizer.zero_grad()
    with pytest.raises(ValueError, match="already a DistributedOptimizer"):
        hvd.DistributedOptimizer(optimizer, op=hvd.Adasum)


def test_adasum_optimizer_on_a_size_that_is_not_a_power_of_two(rank, size):
    """The reductions are refused on every rank: step() raises there, and the parameters keep
    their values from before the step."""
    skip_unless(not power_of_two(size), "checks a size that is not a power of two")
    model = Net()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = hvd.DistributedOptimizer(make_sgd(model), op=hvd.Adasum)
    x, y = batch(rank, 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    with pytest.raises(herd.UnsupportedError, match=f"has {size} ranks"):
        optimizer.step()
    for p, b in zip(model.parameters(), before):
        expect(torch.equal(p.detach(), b), "a parameter changed in a failed step")
    still_works(rank, size, "optimizer")


class _FailingOnRankZero:
    """A compression that fails on rank 0 only (while ``armed``)."""

    armed = True

    @staticmethod
    def compress(tensor):
        if _FailingOnRankZero.armed and herd.rank() == 0:
            raise RuntimeError("compression failed on purpose")
        return tensor, None

    @staticmethod
    def decompress(tensor, context):
        return tensor


@needs_power_of_two
def test_adasum_optimizer_failure_on_one_rank_fails_every_rank(rank, size):
    """Rank 0's submission fails in a gradient hook: rank 0 raises its own exception, the
    others herd.Error naming it; every parameter keeps its value from before the step, and the
    next step works."""
    model = Net()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = hvd.DistributedOptimizer(make_sgd(model), named_parameters=model.named_parameters(),
                                         compression=_FailingOnRankZero, op=hvd.Adasum)
    x, y = batch(rank, 0)
    torch.nn.functional.mse_loss(model(x), y).backward()
    if rank == 0:
        with pytest.raises(RuntimeError, match="compression failed on purpose"):
            optimizer.step()
    else:
        with pytest.raises(herd.Error, match="rank 0 failed: RuntimeError: compression failed"):
            optimizer.step()
    for p, b in zip(model.parameters(), before):
        expect(torch.equal(p.detach(), b), "a parameter changed in a failed step")
    _FailingOnRankZero.armed = False
    try:
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    finally:
        _FailingOnRankZero.armed = True
    for name, p in model.named_parameters():
        check_same_on_every_rank(p.detach(), f"{name} after the next step")
