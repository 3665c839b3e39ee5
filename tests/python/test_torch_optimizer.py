"""herd.torch.DistributedOptimizer against plain single-process torch training.

Every rank trains the same small float64 model on its shard of a fixed global
batch; the reference trains the same model, in the same process and with plain
torch (no herd), on the whole batch. What the reference computes is the
gradient DistributedOptimizer promises:

- op=Average: each rank's gradient of (its shard's mean loss / passes) summed
  over the step's backward passes, then averaged over the ranks: the gradient
  of the mean loss over the whole batch (all shards have the same size).
- op=Sum: size() times that.

After training, every rank's parameters must be bit-identical (gathered from
all ranks) and match the reference within float64 rounding (fp16 compression:
a looser tolerance).
"""

import warnings

import pytest
import torch

import herd.torch as hvd

FEATURES, HIDDEN, OUTPUTS = 4, 8, 3
ROWS_PER_PASS = 5  # rows of one rank's shard in one backward pass
STEPS = 3
TIGHT = dict(rtol=1e-9, atol=1e-11)


class Net(torch.nn.Module):
    """Linear + ReLU + Linear, with an extra head that ``forward`` uses only when asked
    (a branch some ranks take and others do not)."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = torch.nn.Linear(FEATURES, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUTPUTS)
        self.extra = torch.nn.Linear(HIDDEN, OUTPUTS)
        self.double()

    def forward(self, x, use_extra=False):
        hidden = torch.relu(self.fc1(x))
        out = self.fc2(hidden)
        return out + self.extra(hidden) if use_extra else out


def trainable(model, with_extra=False):
    """The parameters a test optimizes (the extra head only where a test uses it)."""
    return [(n, p) for n, p in model.named_parameters()
            if with_extra or not n.startswith("extra.")]


def batch(step, ranks, passes, seed=1234):
    """The global batch of ``step``: [ranks, passes, ROWS_PER_PASS, ...] inputs and targets,
    the same on every rank (shard r, pass k is x[r, k])."""
    generator = torch.Generator().manual_seed(seed + step)
    x = torch.randn(ranks, passes, ROWS_PER_PASS, FEATURES, generator=generator,
                    dtype=torch.float64)
    y = torch.randn(ranks, passes, ROWS_PER_PASS, OUTPUTS, generator=generator,
                    dtype=torch.float64)
    return x, y


def mse(model, x, y, use_extra=False):
    return torch.nn.functional.mse_loss(model(x, use_extra), y)


def distributed_steps(model, optimizer, rank, size, passes=1, steps=STEPS):
    """Training as a Horovod user writes it: this rank's shard, loss divided by passes."""
    for step in range(steps):
        x, y = batch(step, size, passes)
        optimizer.zero_grad()
        for k in range(passes):
            (mse(model, x[rank, k], y[rank, k]) / passes).backward()
        optimizer.step()


def reference_steps(model, optimizer, size, passes=1, steps=STEPS, loss_scale=1.0):
    """Plain torch on the whole global batch of every step."""
    for step in range(steps):
        x, y = batch(step, size, passes)
        optimizer.zero_grad()
        (loss_scale * mse(model, x.reshape(-1, FEATURES), y.reshape(-1, OUTPUTS))).backward()
        optimizer.step()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def assert_same_on_every_rank(model, process_set=hvd.global_process_set):
    """Parameters gathered from every rank must be bit-identical. (Named: an unnamed
    allgather takes a per-rank counter's name, which drifts apart once only some ranks
    ran one.)"""
    mine = flat(model)
    gathered = hvd.allgather(mine.reshape(1, -1), name=f"test.parameters.{process_set.ranks}",
                             process_set=process_set)
    for member, row in enumerate(gathered):
        assert torch.equal(row, mine), f"member {member} differs from this rank"


def assert_matches(model, reference, **tolerance):
    tolerance = tolerance or TIGHT
    for (name, got), (_, want) in zip(model.named_parameters(), reference.named_parameters()):
        torch.testing.assert_close(got.detach(), want.detach(), msg=f"parameter {name}",
                                   **tolerance)


def sgd(params):
    return torch.optim.SGD(params, lr=0.1, momentum=0.9)


def run_against_reference(rank, size, make_optimizer, passes=1, loss_scale=1.0, steps=STEPS,
                          **wrap):
    """Trains a wrapped and a reference model; returns both (parameters already checked
    equal across ranks)."""
    model, reference = Net(7), Net(7)
    optimizer = hvd.DistributedOptimizer(make_optimizer(p for _, p in trainable(model)),
                                         named_parameters=trainable(model),
                                         backward_passes_per_step=passes, **wrap)
    distributed_steps(model, optimizer, rank, size, passes, steps)
    reference_steps(reference, make_optimizer(p for _, p in trainable(reference)), size,
                    passes, steps, loss_scale)
    assert_same_on_every_rank(model)
    return model, reference


def test_sgd_momentum_matches_single_process(rank, size):
    model, reference = run_against_reference(rank, size, sgd)
    assert_matches(model, reference)


def test_adam_matches_single_process(rank, size):
    model, reference = run_against_reference(rank, size,
                                             lambda ps: torch.optim.Adam(ps, lr=0.01))
    assert_matches(model, reference)


@pytest.mark.parametrize("passes", [2, 3])
def test_backward_passes_per_step(rank, size, passes):
    model, reference = run_against_reference(rank, size, sgd, passes=passes)
    assert_matches(model, reference)


def test_accumulated_gradient_is_sum_over_passes(rank, size):
    """Without dividing the loss by the passes, the reduced gradient is the passes' sum:
    ``passes`` times the gradient of the whole batch's mean loss."""
    passes = 2
    model, reference = Net(3), Net(3)
    optimizer = hvd.DistributedOptimizer(sgd(p for _, p in trainable(model)),
                                         named_parameters=trainable(model),
                                         backward_passes_per_step=passes)
    x, y = batch(0, size, passes)
    for k in range(passes):
        mse(model, x[rank, k], y[rank, k]).backward()
    optimizer.synchronize()
    (passes * mse(reference, x.reshape(-1, FEATURES), y.reshape(-1, OUTPUTS))).backward()
    for (name, p), (_, q) in zip(trainable(model), trainable(reference)):
        torch.testing.assert_close(p.grad, q.grad, msg=f"gradient of {name}", **TIGHT)
    with optimizer.skip_synchronize():
        optimizer.step()


def test_gradient_predivide_factor(rank, size):
    model, reference = run_against_reference(rank, size, sgd, gradient_predivide_factor=2.5)
    assert_matches(model, reference)


def test_op_sum(rank, size):
    model, reference = run_against_reference(rank, size, sgd, loss_scale=size, op=hvd.Sum)
    assert_matches(model, reference)


def test_fp16_compression(rank, size):
    model, reference = run_against_reference(rank, size, sgd,
                                             compression=hvd.Compression.fp16)
    # float16 keeps ~3 significant digits of each gradient.
    assert_matches(model, reference, rtol=1e-2, atol=2e-3)


@pytest.mark.parametrize("grouping", ["num_groups", "groups_int", "groups_list"])
def test_groups(rank, size, grouping, monkeypatch):
    """Grouped reductions: the result matches, and the groups are the ones asked for
    (recorded as (first parameter's name, member count) per grouped allreduce)."""
    import herd.torch.optimizer as optimizer_module

    calls = []
    grouped = optimizer_module.grouped_allreduce_async_

    def recording(tensors, **kwargs):
        calls.append((kwargs["name"], len(tensors)))
        return grouped(tensors, **kwargs)

    def single(*args, **kwargs):
        raise AssertionError("a grouped optimizer reduced a parameter alone")

    monkeypatch.setattr(optimizer_module, "grouped_allreduce_async_", recording)
    monkeypatch.setattr(optimizer_module, "allreduce_async_", single)
    expected = {
        # 6 parameters in order fc1.weight, fc1.bias, fc2.weight, fc2.bias, extra.weight, ...
        "num_groups": [("fc1.weight", 3), ("fc2.bias", 3)],
        "groups_int": [("fc1.weight", 2), ("fc2.weight", 2), ("extra.weight", 2)],
        "groups_list": [("fc1.weight", 2), ("fc1.bias", 1), ("fc2.weight", 1),
                        ("extra.weight", 1), ("extra.bias", 1)],
    }[grouping]
    model, reference = Net(11), Net(11)
    if grouping == "num_groups":
        with pytest.warns(DeprecationWarning):
            wrap = dict(num_groups=2)
            optimizer = hvd.DistributedOptimizer(sgd(model.parameters()),
                                                 named_parameters=model.named_parameters(),
                                                 **wrap)
    else:
        groups = 3 if grouping == "groups_int" else [[model.fc1.weight, model.fc2.bias],
                                                     [model.fc1.bias]]
        optimizer = hvd.DistributedOptimizer(sgd(model.parameters()),
                                             named_parameters=model.named_parameters(),
                                             groups=groups)
    # The extra head stays unused on every rank: its group is submitted by synchronize.
    distributed_steps(model, optimizer, rank, size)
    assert sorted(calls) == sorted(expected * STEPS)
    reference_steps(reference, sgd(reference.parameters()), size)
    assert_same_on_every_rank(model)
    assert_matches(model, reference)


@pytest.mark.parametrize("groups", [None, 2])
def test_parameter_unused_on_some_ranks(rank, size, groups):
    """The extra head runs on rank 0 only: the other ranks never fire its hooks and submit
    zeros at step(), so nobody hangs and the head gets rank 0's gradient / size."""
    model, reference = Net(5), Net(5)
    optimizer = hvd.DistributedOptimizer(torch.optim.Adam(model.parameters(), lr=0.01),
                                         named_parameters=model.named_parameters(),
                                         groups=groups)
    plain = torch.optim.Adam(reference.parameters(), lr=0.01)
    for step in range(STEPS):
        x, y = batch(step, size, 1)
        optimizer.zero_grad()
        mse(model, x[rank, 0], y[rank, 0], use_extra=(rank == 0)).backward()
        optimizer.step()
        # Reference: the mean over ranks of each rank's loss, the branch on rank 0 only.
        plain.zero_grad()
        total = sum(mse(reference, x[r, 0], y[r, 0], use_extra=(r == 0)) for r in range(size))
        (total / size).backward()
        plain.step()
    assert_same_on_every_rank(model)
    assert_matches(model, reference)


def test_skip_synchronize_with_gradient_clipping(rank, size):
    """synchronize(), clip the reduced gradients, then step() without reducing again."""
    max_norm = 0.05
    model, reference = Net(9), Net(9)
    optimizer = hvd.DistributedOptimizer(sgd(p for _, p in trainable(model)),
                                         named_parameters=trainable(model))
    plain = sgd(p for _, p in trainable(reference))
    for step in range(STEPS):
        x, y = batch(step, size, 1)
        optimizer.zero_grad()
        mse(model, x[rank, 0], y[rank, 0]).backward()
        optimizer.synchronize()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        with optimizer.skip_synchronize():
            optimizer.step()
        plain.zero_grad()
        mse(reference, x.reshape(-1, FEATURES), y.reshape(-1, OUTPUTS)).backward()
        want_norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), max_norm)
        plain.step()
        torch.testing.assert_close(norm, want_norm, **TIGHT)
        assert norm > max_norm  # the clipping did clip
    assert_same_on_every_rank(model)
    assert_matches(model, reference)


def test_step_after_synchronize_warns_and_does_not_reduce_twice(rank, size):
    """Horovod warns when step() follows synchronize() outside skip_synchronize(); herd
    also does not reduce the gradients a second time (which with op=Sum would multiply
    them by size)."""
    model, reference = Net(2), Net(2)
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([p for _, p in trainable(model)],
                                                         lr=0.1),
                                         named_parameters=trainable(model), op=hvd.Sum)
    x, y = batch(0, size, 1)
    mse(model, x[rank, 0], y[rank, 0]).backward()
    optimizer.synchronize()
    phrase = r"optimizer.step\(\) called without optimizer.skip_synchronize\(\)"
    with pytest.warns(UserWarning, match=phrase):
        optimizer.step()
    plain = torch.optim.SGD([p for _, p in trainable(reference)], lr=0.1)
    (size * mse(reference, x.reshape(-1, FEATURES), y.reshape(-1, OUTPUTS))).backward()
    plain.step()
    assert_same_on_every_rank(model)
    assert_matches(model, reference)


def test_zero_grad_with_outstanding_reductions_raises(rank, size):
    model, reference = Net(4), Net(4)
    optimizer = hvd.DistributedOptimizer(sgd(p for _, p in trainable(model)),
                                         named_parameters=trainable(model))
    x, y = batch(0, size, 1)
    mse(model, x[rank, 0], y[rank, 0]).backward()
    with pytest.raises(AssertionError, match="zero_grad"):
        optimizer.zero_grad()
    optimizer.step()  # the reductions were not disturbed
    optimizer.zero_grad()
    reference_steps(reference, sgd(p for _, p in trainable(reference)), size, steps=1)
    assert_same_on_every_rank(model)
    assert_matches(model, reference)


@pytest.mark.parametrize("passes", [1, 2])
def test_too_many_backward_passes_raises(rank, size, passes):
    model = Net(6)
    optimizer = hvd.DistributedOptimizer(sgd(p for _, p in trainable(model)),
                                         named_parameters=trainable(model),
                                         backward_passes_per_step=passes)
    x, y = batch(0, size, passes + 1)
    for k in range(passes):
        mse(model, x[rank, k], y[rank, k]).backward()
    # The extra pass adds into gradients still being reduced (Horovod's race too): their
    # values are lost, which the clean step below does not mind.
    with pytest.raises(AssertionError, match="more than backward_passes_per_step"):
        mse(model, x[rank, passes], y[rank, passes]).backward()
    # The optimizer recovers: a clean step trains the same model on every rank.
    optimizer.synchronize()
    optimizer.zero_grad()
    distributed_steps(model, optimizer, rank, size, passes, steps=1)
    assert_same_on_every_rank(model)


def test_wrapped_optimizer_keeps_class_and_state_dict(rank, size):
    # One DistributedOptimizer per model at a time: two live ones would both reduce its
    # gradients (under the same names), as with Horovod.
    model, other, third = Net(13), Net(13), Net(13)
    trained = hvd.DistributedOptimizer(sgd(model.parameters()),
                                       named_parameters=model.named_parameters())
    assert isinstance(trained, torch.optim.SGD)
    assert type(trained).__name__ == "SGD"
    assert type(trained) is not torch.optim.SGD
    distributed_steps(model, trained, rank, size, steps=2)
    # The momentum of a trained optimizer round-trips through state_dict.
    state = trained.state_dict()
    assert len(state["state"]) == len(list(model.parameters()))
    wrapped = hvd.DistributedOptimizer(sgd(other.parameters()),
                                       named_parameters=other.named_parameters())
    wrapped.load_state_dict(state)
    for p, q in zip(trained.param_groups[0]["params"], wrapped.param_groups[0]["params"]):
        assert torch.equal(trained.state[p]["momentum_buffer"],
                           wrapped.state[q]["momentum_buffer"])
    assert wrapped.state_dict()["param_groups"] == state["param_groups"]
    # State a plain optimizer had before wrapping carries over.
    plain = sgd(third.parameters())
    plain.load_state_dict(state)
    rewrapped = hvd.DistributedOptimizer(plain, named_parameters=third.named_parameters())
    assert torch.equal(rewrapped.state_dict()["state"][0]["momentum_buffer"],
                       state["state"][0]["momentum_buffer"])
    with pytest.raises(ValueError, match="already a DistributedOptimizer"):
        hvd.DistributedOptimizer(wrapped)


def test_process_set_subset(rank, size):
    """Reduces among the first size-1 ranks only ([0, 1] at 3 ranks, [0] at 2); the last
    rank is not a member: its optimizer steps on local gradients alone."""
    members = list(range(size - 1))
    subset = hvd.add_process_set(members)
    try:
        model, reference = Net(8), Net(8)
        optimizer = hvd.DistributedOptimizer(sgd(p for _, p in trainable(model)),
                                             named_parameters=trainable(model),
                                             process_set=subset)
        distributed_steps(model, optimizer, rank, size)
        plain = sgd(p for _, p in trainable(reference))
        for step in range(STEPS):
            x, y = batch(step, size, 1)
            rows = x[members, 0] if rank in members else x[rank, 0]
            targets = y[members, 0] if rank in members else y[rank, 0]
            plain.zero_grad()
            mse(reference, rows.reshape(-1, FEATURES), targets.reshape(-1, OUTPUTS)).backward()
            plain.step()
        if rank in members:
            assert_same_on_every_rank(model, process_set=subset)
        assert_matches(model, reference)
    finally:
        hvd.remove_process_set(subset)


def test_sparse_gradients(rank, size):
    """An embedding with sparse gradients: gathered nonzeros (default) or reduced dense."""
    rows_per_rank = 4
    generator = torch.Generator().manual_seed(99)
    tokens = torch.randint(0, 10, (size, rows_per_rank), generator=generator)
    targets = torch.randn(size, rows_per_rank, 3, generator=generator, dtype=torch.float64)
    for sparse_as_dense in (False, True):
        torch.manual_seed(1)
        embedding = torch.nn.Embedding(10, 3, sparse=True).double()
        torch.manual_seed(1)
        reference = torch.nn.Embedding(10, 3).double()
        optimizer = hvd.DistributedOptimizer(torch.optim.SGD(embedding.parameters(), lr=0.5),
                                             named_parameters=embedding.named_parameters(),
                                             sparse_as_dense=sparse_as_dense)
        plain = torch.optim.SGD(reference.parameters(), lr=0.5)
        for _ in range(2):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(embedding(tokens[rank]), targets[rank]).backward()
            optimizer.step()
            plain.zero_grad()
            torch.nn.functional.mse_loss(reference(tokens.reshape(-1)),
                                         targets.reshape(-1, 3)).backward()
            plain.step()
        assert embedding.weight.grad.is_sparse
        torch.testing.assert_close(embedding.weight.detach(), reference.weight.detach(),
                                   **TIGHT)
        assert_same_on_every_rank(embedding)


def test_reduction_failure_raises_on_every_rank_and_recovers(rank, size):
    """A parameter whose shape differs between ranks fails its reduction on every rank at
    step(); the other reductions still complete and the optimizer stays usable."""
    odd = torch.nn.Parameter(torch.ones(rank + 1, dtype=torch.float64))
    good = torch.nn.Parameter(torch.full((2,), float(rank), dtype=torch.float64))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([odd, good], lr=1.0),
                                         named_parameters=[("odd", odd), ("good", good)])
    ((odd * odd).sum() + (good * good).sum()).backward()
    with pytest.raises(hvd.HorovodInternalError, match="odd"):
        optimizer.step()
    # good's gradient 2 * rank was averaged all the same: mean over ranks of 2r = size - 1.
    torch.testing.assert_close(good.grad, torch.full((2,), float(size - 1),
                                                     dtype=torch.float64))
    optimizer.zero_grad()  # nothing is outstanding any more
    # Later reductions work: a new optimizer without the odd parameter (the dropped one's
    # hooks hold it weakly and go quiet).
    del optimizer
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([good], lr=1.0),
                                         named_parameters=[("good", good)])
    optimizer.zero_grad()
    ((odd * odd).sum() + (good * good).sum()).backward()
    optimizer.step()
    torch.testing.assert_close(good.detach(), torch.full((2,), rank - (size - 1.0),
                                                         dtype=torch.float64))


def test_group_of_mixed_dtypes(rank, size):
    """A group holding float32 and float64 parameters goes as one grouped allreduce per
    dtype; the result is still the average."""
    single = torch.nn.Parameter(torch.zeros(3, dtype=torch.float32))
    double = torch.nn.Parameter(torch.zeros(2, dtype=torch.float64))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD([single, double], lr=1.0),
                                         named_parameters=[("s", single), ("d", double)],
                                         groups=[[single, double]])
    ((rank + 1) * single.sum() + (rank + 2) * double.sum()).backward()
    optimizer.step()
    # Gradients (r + 1) and (r + 2), averaged over r = 0 .. size-1, then subtracted.
    torch.testing.assert_close(single.detach(), torch.full((3,), -(size + 1) / 2,
                                                           dtype=torch.float32))
    torch.testing.assert_close(double.detach(), torch.full((2,), -(size + 3) / 2,
                                                           dtype=torch.float64))


def test_argument_errors(rank, size):
    """Checked at construction, identically on every rank (no collective is involved)."""
    model = Net(1)
    named = list(model.named_parameters())
    with pytest.raises(ValueError, match="must be unique"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 named_parameters=named + [(named[0][0], named[1][1])])
    with pytest.raises(ValueError, match="without a name"):
        hvd.DistributedOptimizer(sgd(model.parameters()), named_parameters=named[1:])
    with pytest.raises(ValueError, match="tuples"):
        hvd.DistributedOptimizer(sgd(model.parameters()), named_parameters=[p for _, p in named])
    with pytest.raises(ValueError, match="gradient_predivide_factor"):
        hvd.DistributedOptimizer(sgd(model.parameters()), op=hvd.Sum,
                                 gradient_predivide_factor=2.0)
    with pytest.raises(ValueError, match="groups"):
        hvd.DistributedOptimizer(sgd(model.parameters()), groups=-1)
    with pytest.raises(ValueError, match="more than one of the groups"):
        hvd.DistributedOptimizer(sgd(model.parameters()),
                                 groups=[[model.fc1.weight], [model.fc1.weight]])


def test_unnamed_parameters_get_deterministic_names(rank, size):
    """Without named_parameters (two parameter groups) training still matches."""
    model, reference = Net(12), Net(12)

    def make(net):
        return torch.optim.SGD([{"params": net.fc1.parameters()},
                                {"params": net.fc2.parameters(), "lr": 0.05}], lr=0.1)

    optimizer = hvd.DistributedOptimizer(make(model))
    distributed_steps(model, optimizer, rank, size)
    reference_steps(reference, make(reference), size)
    assert_same_on_every_rank(model)
    assert_matches(model, reference)


def test_parameter_names_without_and_with_named_parameters(rank, size):
    """``_parameter_names`` maps each parameter to its name: Horovod's
    ``allreduce.noname.<group>.<index>`` without named_parameters, the given names with."""
    model = Net(13)
    groups = [{"params": [model.fc1.weight, model.fc1.bias]},
              {"params": [model.fc2.weight, model.fc2.bias, model.extra.weight]}]
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(groups, lr=0.1))
    expected = {model.fc1.weight: "allreduce.noname.0.0", model.fc1.bias: "allreduce.noname.0.1",
                model.fc2.weight: "allreduce.noname.1.0", model.fc2.bias: "allreduce.noname.1.1",
                model.extra.weight: "allreduce.noname.1.2"}
    assert optimizer._parameter_names == expected
    assert hvd.allgather_object(sorted(optimizer._parameter_names.values()),
                                name="parameter_names") == [sorted(expected.values())] * size

    named = hvd.DistributedOptimizer(sgd(model.parameters()),
                                     named_parameters=model.named_parameters())
    assert named._parameter_names == {p: n for n, p in model.named_parameters()}


def test_unnamed_sparse_and_dense_parameters_train_together(rank, size):
    """An embedding (sparse gradient) and a linear layer in one unnamed optimizer: every
    rank names them alike, and the step matches the single-process one on all tokens."""

    def build():
        torch.manual_seed(21)
        return (torch.nn.Embedding(6, FEATURES, sparse=True).double(),
                torch.nn.Linear(FEATURES, 1).double())

    (embedding, head), (ref_embedding, ref_head) = build(), build()
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(
        list(embedding.parameters()) + list(head.parameters()), lr=0.3))
    plain = torch.optim.SGD(list(ref_embedding.parameters()) + list(ref_head.parameters()),
                            lr=0.3)
    generator = torch.Generator().manual_seed(8)
    tokens = torch.randint(0, 6, (size, 4), generator=generator)
    targets = torch.randn(size, 4, 1, generator=generator, dtype=torch.float64)
    for _ in range(2):
        optimizer.zero_grad()
        mse_loss = torch.nn.functional.mse_loss
        mse_loss(head(embedding(tokens[rank])), targets[rank]).backward()
        optimizer.step()
        plain.zero_grad()
        mse_loss(ref_head(ref_embedding(tokens.reshape(-1))), targets.reshape(-1, 1)).backward()
        plain.step()
    torch.testing.assert_close(embedding.weight.detach(), ref_embedding.weight.detach(),
                               **TIGHT)
    assert_matches(head, ref_head)


def test_drop_in_horovod_script(rank, size):
    """A training loop written exactly as for horovod.torch, with herd.torch as hvd."""
    import herd.torch as hvd  # noqa: F811 -- as the script would

    hvd.init()
    torch.manual_seed(hvd.rank())  # ranks start apart; broadcast_parameters unifies them
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                torch.nn.Linear(HIDDEN, OUTPUTS)).double()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Reference: rank 0's initial model trained on the whole batch (seed 0 is rank 0's).
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(FEATURES, HIDDEN), torch.nn.ReLU(),
                                    torch.nn.Linear(HIDDEN, OUTPUTS)).double()
    plain = torch.optim.Adam(reference.parameters(), lr=0.01 * size)
    # broadcast_optimizer_state gave the fresh Adam its state with one step on zero
    # gradients (Horovod's way), which moved nothing but counts as Adam's first step.
    for p in reference.parameters():
        p.grad = torch.zeros_like(p)
    plain.step()

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a normal loop warns about nothing
        for step in range(STEPS):
            x, y = batch(step, hvd.size(), 1)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x[hvd.rank(), 0]), y[hvd.rank(), 0])
            loss.backward()
            optimizer.step()
            plain.zero_grad()
            torch.nn.functional.mse_loss(reference(x.reshape(-1, FEATURES)),
                                         y.reshape(-1, OUTPUTS)).backward()
            plain.step()
    for got, want in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(got.detach(), want.detach(), **TIGHT)
    mine = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    assert all(torch.equal(row, mine) for row in hvd.allgather(mine.reshape(1, -1)))
