"""herd.torch.shared_zeros under mpirun at 2 and 3 ranks: zeroed tensors of
every shape and dtype asked for, alive as long as any view of them, and
allreduced (in place, views of one arena together, and out of place) with
exact results computed here from every rank's formula; and DistributedOptimizer's
shared_gradients, which must train bit for bit as without it while the
gradients stay in their arena."""

import gc

import pytest
import torch

import herd.torch as hvd


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.float16])
@pytest.mark.parametrize("shape", [(7,), (5, 3), [1 << 16], 9])
def test_zeroed_of_shape_and_dtype(shape, dtype):
    t = hvd.shared_zeros(shape, dtype=dtype)
    expected = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    assert t.shape == expected and t.dtype == dtype and t.device.type == "cpu"
    assert bool((t == 0).all())


def test_empty_is_an_ordinary_tensor():
    t = hvd.shared_zeros((0, 4))
    assert t.shape == (0, 4) and t.numel() == 0


def test_a_view_keeps_the_buffer_alive():
    view = hvd.shared_zeros((1 << 20,))[10:20]
    gc.collect()
    view.fill_(3.0)
    assert bool((view == 3.0).all())


def test_arena_views_allreduced_in_place():
    rank, size = hvd.rank(), hvd.size()
    counts = [1000, 70001, 3, 1 << 20, 17]
    arena = hvd.shared_zeros((sum(counts),))
    views = list(torch.split(arena, counts))
    for round_ in range(2):
        for t, view in enumerate(views):
            view.copy_((torch.arange(view.numel()) + t + round_ + rank) % 32)
        handles = [hvd.allreduce_async_(view, op=hvd.Sum, name=f"shared.{t}")
                   for t, view in reversed(list(enumerate(views)))]
        for handle in handles:
            hvd.synchronize(handle)
        for t, view in enumerate(views):
            i = torch.arange(view.numel())
            expected = sum(((i + t + round_ + r) % 32) for r in range(size)).float()
            assert torch.equal(view, expected), f"view {t} round {round_}"


def test_out_of_place():
    rank, size = hvd.rank(), hvd.size()
    x = hvd.shared_zeros((3 << 18,))
    x.copy_((torch.arange(x.numel()) * 3 + rank) % 50)
    y = hvd.allreduce(x, op=hvd.Sum, name="shared.out_of_place")
    i = torch.arange(x.numel())
    assert torch.equal(y, sum(((i * 3 + r) % 50) for r in range(size)).float())


def _train(shared_gradients, steps=3):
    """A small model trained `steps` steps on rank-unique data; its parameters, and the
    addresses of its gradients after each step."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(40, 1000), torch.nn.ReLU(),
                                torch.nn.Linear(1000, 7))
    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                         named_parameters=model.named_parameters(),
                                         shared_gradients=shared_gradients)
    generator = torch.Generator().manual_seed(100 + hvd.rank())
    addresses = []
    for _ in range(steps):
        optimizer.zero_grad()
        x = torch.randn(16, 40, generator=generator)
        model(x).square().sum().backward()
        optimizer.step()
        addresses.append([p.grad.data_ptr() for p in model.parameters()])
    return [p.detach().clone() for p in model.parameters()], addresses


def test_optimizer_shared_gradients_match_the_ordinary_ones():
    plain, _ = _train(False)
    shared, addresses = _train(True)
    for a, b in zip(plain, shared):
        assert torch.equal(a, b)
    # The gradients stayed in their arena, one after another in parameter order.
    assert all(step == addresses[0] for step in addresses)
    sizes = [p.numel() * p.element_size() for p in plain]
    for k in range(1, len(sizes)):
        assert addresses[0][k] == addresses[0][k - 1] + sizes[k - 1]
