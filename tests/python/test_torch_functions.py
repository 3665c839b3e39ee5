"""broadcast_parameters, broadcast_optimizer_state, broadcast_object and allgather_object,
under mpirun.

Every rank builds its model and optimizer from a seed equal to its rank; what
the root's are is recomputed here from the root's seed (torch's own
generator and optimizer, never herd), so after a broadcast each rank compares
its state with an independent copy of the root's.
"""

import pytest
import torch

import herd.torch as hvd
from rank_checks import expect


def make_model(seed):
    """A small model whose every parameter and buffer depends on ``seed``."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3),
                                torch.nn.Linear(3, 2, bias=False))
    with torch.no_grad():
        model[1].running_mean.fill_(seed)
        model[1].num_batches_tracked.fill_(seed + 1)
    return model


def fixed_gradients(model, seed, step):
    """Gradients that are a closed form of seed and step."""
    for index, p in enumerate(model.parameters()):
        count = p.numel()
        g = (torch.arange(count, dtype=torch.float32) + seed * 10 + step * 3 + index) % 7 - 3
        p.grad = g.reshape(p.shape) / 4


def train(model, optimizer, seed, steps):
    for step in range(steps):
        fixed_gradients(model, seed, step)
        optimizer.step()


def check_same_tensors(actual, expected, what):
    expect(actual.keys() == expected.keys(), f"{what}: keys {list(actual.keys())}")
    for key in expected.keys() & actual.keys():
        a, e = actual[key], expected[key]
        expect(a.dtype == e.dtype and a.shape == e.shape and torch.equal(a, e),
               f"{what} {key}: expected {e.tolist()}, got {a.tolist()}")


def check_optimizer_state(actual, expected, what):
    """Every hyper-parameter and every state entry of ``actual`` equals ``expected``'s."""
    expect(len(actual.param_groups) == len(expected.param_groups), f"{what}: param groups")
    for group, want in zip(actual.param_groups, expected.param_groups):
        for key, value in want.items():
            if key != "params":
                expect(group[key] == value and type(group[key]) is type(value),
                       f"{what}: {key} is {group[key]!r}, expected {value!r}")
        for p, q in zip(group["params"], want["params"]):
            state, state_want = actual.state[p], expected.state[q]
            expect(state.keys() == state_want.keys(), f"{what}: state keys {state.keys()}")
            for key, value in state_want.items():
                if torch.is_tensor(value):
                    expect(key in state and torch.equal(state[key], value),
                           f"{what}: state {key}: expected {value}, got {state.get(key)}")
                else:
                    expect(state.get(key) == value, f"{what}: state {key}")


# --------------------------------------------------------------------------
# broadcast_parameters
# --------------------------------------------------------------------------

def test_broadcast_parameters_state_dict(rank, size):
    root = size - 1
    model = make_model(rank)
    hvd.broadcast_parameters(model.state_dict(), root_rank=root)
    check_same_tensors(model.state_dict(), make_model(root).state_dict(), "state_dict")


@pytest.mark.parametrize("form", ["named_parameters", "list_of_pairs", "parameters"])
def test_broadcast_parameters_other_forms(form, rank, size):
    root = 0
    model = make_model(rank + 1)
    params = {"named_parameters": model.named_parameters(),
              "list_of_pairs": list(model.named_parameters()),
              "parameters": list(model.parameters())}[form]
    hvd.broadcast_parameters(params, root)
    expected = dict(make_model(root + 1).named_parameters())
    for name, p in model.named_parameters():
        expect(p.requires_grad, "parameters stay parameters")
        expect(torch.equal(p.detach(), expected[name].detach()), f"{form} {name}")
    # Buffers were not part of the call: still this rank's own.
    expect(torch.equal(model[1].running_mean, torch.full((3,), float(rank + 1))), "buffers")


def test_broadcast_parameters_rejects_other_types(rank, size):
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters(42, 0)
    with pytest.raises(ValueError, match="invalid params"):
        hvd.broadcast_parameters("weights", 0)


# --------------------------------------------------------------------------
# broadcast_optimizer_state
# --------------------------------------------------------------------------

def sgd(model, seed):
    return torch.optim.SGD(model.parameters(), lr=0.1 * (seed + 1), momentum=0.5 + 0.1 * seed,
                           nesterov=seed % 2 == 1, dampening=0.0)


def adam(model, seed):
    return torch.optim.Adam(model.parameters(), lr=0.01 * (seed + 1),
                            betas=(0.8 + 0.01 * seed, 0.99 - 0.001 * seed), eps=1e-8 * (seed + 1))


@pytest.mark.parametrize("make_optimizer", [sgd, adam], ids=["sgd", "adam"])
def test_broadcast_optimizer_state_before_the_first_step(make_optimizer, rank, size):
    root = size - 1
    model = make_model(rank)
    optimizer = make_optimizer(model, rank)
    assert len(optimizer.state) == 0
    hvd.broadcast_optimizer_state(optimizer, root_rank=root)

    # Horovod's rule: a fresh optimizer first steps once on zero gradients, which
    # creates its state and leaves the weights where they were.
    expected_model = make_model(root)
    expected = make_optimizer(expected_model, root)
    for p in expected_model.parameters():
        p.grad = torch.zeros_like(p)
    expected.step()
    check_optimizer_state(optimizer, expected, "fresh optimizer")
    check_same_tensors(model.state_dict(), make_model(rank).state_dict(), "weights unchanged")


@pytest.mark.parametrize("make_optimizer", [sgd, adam], ids=["sgd", "adam"])
def test_broadcast_optimizer_state_after_steps(make_optimizer, rank, size):
    root = 0
    model = make_model(rank)
    optimizer = make_optimizer(model, rank)
    train(model, optimizer, seed=rank, steps=rank + 1)  # ranks differ in state and step count
    hvd.broadcast_optimizer_state(optimizer, root)

    expected_model = make_model(root)
    expected = make_optimizer(expected_model, root)
    train(expected_model, expected, seed=root, steps=root + 1)
    check_optimizer_state(optimizer, expected, "after steps")

    # The states being equal, the same step from the same weights gives the same weights.
    hvd.broadcast_parameters(model.state_dict(), root)
    fixed_gradients(model, 100, 0)
    optimizer.step()
    fixed_gradients(expected_model, 100, 0)
    expected.step()
    check_same_tensors(model.state_dict(), expected_model.state_dict(), "next step")


def test_broadcast_optimizer_state_when_only_the_root_has_state(rank, size):
    """The usual resume: the root loaded a checkpoint, the others start fresh."""
    root = 0
    model = make_model(rank)
    optimizer = adam(model, rank)
    if rank == root:
        train(model, optimizer, seed=root, steps=3)
    hvd.broadcast_optimizer_state(optimizer, root)
    expected_model = make_model(root)
    expected = adam(expected_model, root)
    train(expected_model, expected, seed=root, steps=3)
    check_optimizer_state(optimizer, expected, "resume")


def test_broadcast_optimizer_state_of_a_distributed_optimizer(rank, size):
    """A DistributedOptimizer's fresh state comes from a local step: no allreduce, so
    no deadlock even though nobody else steps."""
    root = size - 1
    model = make_model(rank)
    optimizer = hvd.DistributedOptimizer(sgd(model, rank),
                                         named_parameters=model.named_parameters())
    hvd.broadcast_optimizer_state(optimizer, root)
    expected_model = make_model(root)
    expected = sgd(expected_model, root)
    for p in expected_model.parameters():
        p.grad = torch.zeros_like(p)
    expected.step()
    check_optimizer_state(optimizer, expected, "distributed optimizer")


def test_broadcast_optimizer_state_non_tensor_entries_and_refusal(rank, size):
    root = size - 1
    model = make_model(rank)
    # Without momentum, torch 1.13's SGD keeps momentum_buffer=None entries: non-tensor
    # state, which travels pickled with the hyper-parameters.
    plain = torch.optim.SGD(model.parameters(), lr=0.5 + rank, weight_decay=0.01 * rank)
    hvd.broadcast_optimizer_state(plain, root)
    expected_model = make_model(root)
    expected = torch.optim.SGD(expected_model.parameters(), lr=0.5 + root,
                               weight_decay=0.01 * root)
    for p in expected_model.parameters():
        p.grad = torch.zeros_like(p)
    expected.step()
    check_optimizer_state(plain, expected, "plain SGD")
    with pytest.raises(ValueError, match="LBFGS"):
        hvd.broadcast_optimizer_state(torch.optim.LBFGS(model.parameters()), 0)


# --------------------------------------------------------------------------
# broadcast_object and allgather_object
# --------------------------------------------------------------------------

def rank_object(rank):
    return {"rank": rank, "name": f"worker-{rank}", "data": list(range(rank * 3)),
            "nested": {"t": (rank, 2.5 * rank), "none": None}}


def test_broadcast_object(rank, size):
    for root in range(size):
        expect(hvd.broadcast_object(rank_object(rank), root_rank=root) == rank_object(root),
               f"root {root}")
    expect(hvd.broadcast_object(rank_object(rank)) == rank_object(0), "root_rank defaults to 0")
    big = bytes(range(256)) * 4096 if rank == 1 else b""
    expect(hvd.broadcast_object(big, 1, name="big") == bytes(range(256)) * 4096, "1 MB")


def test_allgather_object(rank, size):
    expect(hvd.allgather_object(rank_object(rank)) == [rank_object(r) for r in range(size)],
           "dicts")
    varied = "x" * (1000 * rank)
    expect(hvd.allgather_object(varied, name="varied") == ["x" * (1000 * r) for r in range(size)],
           "strings of different lengths")
