"""Gradients through herd.torch's differentiable collectives, under mpirun.

Each rank's loss is sum(output * w_rank) with rank-unique weights w, so the
gradient of every collective is a closed form of the weights of all ranks,
following Horovod 0.28's rules (each test names its rule). Inputs and weights
are small integers in float64: every expected value is exact.
"""


import pytest
import torch

import herd.torch as hvd
from rank_checks import expect, rank_values


def values(rank, shape, salt=0, dtype=torch.float64):
    return rank_values(rank, shape, dtype, salt)


def weights(rank, shape, salt=0):
    """Rank-unique loss weights, different from the inputs."""
    return values(rank, shape, salt=salt + 5) - 6.0


def leaf(rank, shape, salt=0, dtype=torch.float64):
    return values(rank, shape, salt, dtype).requires_grad_()


def check(actual, expected, what=""):
    if actual is None:
        expect(False, f"{what}: no gradient")
        return
    expect(actual.dtype == expected.dtype and actual.shape == expected.shape
           and torch.allclose(actual, expected, rtol=1e-12, atol=0),
           f"{what}: expected {expected.tolist()} ({expected.dtype}), got {actual.tolist()} "
           f"({actual.dtype})")


def block(rows, index, parts):
    base, extra = divmod(rows, parts)
    return index * base + min(index, extra), base + (1 if index < extra else 0)


# --------------------------------------------------------------------------
# Allreduce: the gradient is allreduce(grad) with the same op and scale factors
# --------------------------------------------------------------------------

@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average, hvd.Min, hvd.Max],
                         ids=["sum", "average", "min", "max"])
def test_allreduce_grad(op, rank, size):
    shape = (2, 3)
    x = leaf(rank, shape)
    y = hvd.allreduce(x, op=op)
    assert y.requires_grad
    (y * weights(rank, shape)).sum().backward()
    stacked = torch.stack([weights(r, shape) for r in range(size)])
    expected = {hvd.Sum: stacked.sum(0), hvd.Average: stacked.mean(0),
                hvd.Min: stacked.min(0).values, hvd.Max: stacked.max(0).values}[op]
    check(x.grad, expected, f"allreduce {op}")


def test_allreduce_grad_scales_and_legacy_average(rank, size):
    shape = (4,)
    pre, post = 0.5, 3.0
    all_weights = [weights(r, shape) for r in range(size)]
    for op, divisor in ((hvd.Sum, 1), (hvd.Average, size)):
        x = leaf(rank, shape)
        y = hvd.allreduce(x, op=op, prescale_factor=pre, postscale_factor=post)
        (y * weights(rank, shape)).sum().backward()
        check(x.grad, sum(w * pre for w in all_weights) / divisor * post, f"scaled {op}")
    x = leaf(rank, shape)
    (hvd.allreduce(x, average=False) * weights(rank, shape)).sum().backward()
    check(x.grad, sum(all_weights), "average=False")
    x = leaf(rank, shape)
    (hvd.allreduce(x, average=True) * weights(rank, shape)).sum().backward()
    check(x.grad, sum(all_weights) / size, "average=True")


def test_allreduce_grad_through_fp16_compression(rank, size):
    shape = (6,)
    x = leaf(rank, shape, dtype=torch.float32)
    y = hvd.allreduce(x, op=hvd.Sum, compression=hvd.Compression.fp16)
    assert y.dtype == torch.float32
    (y * weights(rank, shape).float()).sum().backward()
    check(x.grad, sum(weights(r, shape) for r in range(size)).float(), "fp16")


def test_grouped_allreduce_grad(rank, size):
    shapes = [(3,), (2, 2)]
    xs = [leaf(rank, s, salt=i) for i, s in enumerate(shapes)]
    ys = hvd.grouped_allreduce(xs, op=hvd.Sum)
    sum((y * weights(rank, s, salt=i)).sum() for i, (y, s) in enumerate(zip(ys, shapes))
        ).backward()
    for i, (x, s) in enumerate(zip(xs, shapes)):
        check(x.grad, sum(weights(r, s, salt=i) for r in range(size)), f"grouped {i}")


def test_in_place_calls_are_not_differentiable(rank, size):
    tensor = values(rank, (3,))
    assert hvd.allreduce_(tensor, op=hvd.Sum).grad_fn is None
    assert hvd.broadcast_(tensor, 0).grad_fn is None


# --------------------------------------------------------------------------
# Allgather: the gradient is the average of the ranks' gradients, this rank's rows
# --------------------------------------------------------------------------

def test_allgather_grad(rank, size):
    trailing = (2,)
    rows = [r + 1 for r in range(size)]
    total = sum(rows)
    x = leaf(rank, (rows[rank],) + trailing)
    y = hvd.allgather(x)
    assert y.shape == (total,) + trailing
    (y * weights(rank, (total,) + trailing)).sum().backward()
    offset = sum(rows[:rank])
    mean = sum(weights(r, (total,) + trailing) for r in range(size)) / size
    check(x.grad, mean[offset:offset + rows[rank]], "allgather")


def test_grouped_allgather_grad(rank, size):
    rows = [[r + 1 for r in range(size)], [2 for _ in range(size)]]
    xs = [leaf(rank, (rows[i][rank], 3), salt=i) for i in range(2)]
    ys = hvd.grouped_allgather(xs)
    sum((y * weights(rank, tuple(y.shape), salt=i)).sum() for i, y in enumerate(ys)).backward()
    for i, x in enumerate(xs):
        total = sum(rows[i])
        mean = sum(weights(r, (total, 3), salt=i) for r in range(size)) / size
        offset = sum(rows[i][:rank])
        check(x.grad, mean[offset:offset + rows[i][rank]], f"grouped allgather {i}")


# --------------------------------------------------------------------------
# Broadcast: the gradient is the ranks' average on the root, zero elsewhere
# --------------------------------------------------------------------------

def test_broadcast_grad(rank, size):
    shape = (3, 2)
    for root in range(size):
        x = leaf(rank, shape)
        y = hvd.broadcast(x, root)
        (y * weights(rank, shape)).sum().backward()
        mean = sum(weights(r, shape) for r in range(size)) / size
        check(x.grad, mean if rank == root else torch.zeros(shape, dtype=torch.float64),
              f"broadcast from {root}")


# --------------------------------------------------------------------------
# Alltoall: the gradient goes back to the senders (an alltoall with the received splits)
# --------------------------------------------------------------------------

def a2a_rows(sender, receiver):
    return (sender + 2 * receiver) % 3


def receiver_weight(receiver, sender, trailing):
    """The weight the receiver puts on the rows from ``sender``: a closed form of both."""
    rows = a2a_rows(sender, receiver)
    code = (receiver * 10 + sender) * 4 + torch.arange(rows, dtype=torch.float64) - 50.0
    return code.reshape((rows,) + (1,) * len(trailing)).expand((rows,) + trailing)


def test_alltoall_grad_with_splits(rank, size):
    trailing = (2,)
    splits = [a2a_rows(rank, d) for d in range(size)]
    x = leaf(rank, (sum(splits),) + trailing)
    y, received_splits = hvd.alltoall(x, splits=splits)
    assert not received_splits.requires_grad
    w = torch.cat([receiver_weight(rank, s, trailing) for s in range(size)])
    (y * w).sum().backward()
    expected = torch.cat([receiver_weight(d, rank, trailing) for d in range(size)])
    check(x.grad, expected, "alltoall with splits")


def test_alltoall_grad_even(rank, size):
    x = leaf(rank, (2 * size,))
    y = hvd.alltoall(x)
    (y * weights(rank, (2 * size,))).sum().backward()
    # Rows 2d, 2d+1 went to rank d, which put its weights [2 * rank, 2 * rank + 2) on them.
    expected = torch.cat([weights(d, (2 * size,))[2 * rank:2 * rank + 2] for d in range(size)])
    check(x.grad, expected, "alltoall even")


# --------------------------------------------------------------------------
# Reducescatter: the gradient is the allgather of the gradients, times the set's size
# for Sum and times both scale factors (Horovod 0.28's rule)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("op", [hvd.Sum, hvd.Average], ids=["sum", "average"])
@pytest.mark.parametrize("scales", [(1.0, 1.0), (0.5, 3.0)], ids=["unscaled", "scaled"])
def test_reducescatter_grad(op, scales, rank, size):
    pre, post = scales
    rows = 2 * size + 1
    x = leaf(rank, (rows, 2))
    y = hvd.reducescatter(x, op=op, prescale_factor=pre, postscale_factor=post)
    own_rows = block(rows, rank, size)[1]
    assert y.shape == (own_rows, 2)
    (y * weights(rank, (own_rows, 2))).sum().backward()
    factor = (size if op == hvd.Sum else 1) * pre * post
    expected = torch.cat([weights(r, (block(rows, r, size)[1], 2)) for r in range(size)])
    check(x.grad, expected * factor, f"reducescatter {op} {scales}")


def test_grouped_reducescatter_grad(rank, size):
    rows = size + 2
    xs = [leaf(rank, (rows,), salt=i) for i in range(2)]
    ys = hvd.grouped_reducescatter(xs, op=hvd.Sum)
    own_rows = block(rows, rank, size)[1]
    sum((y * weights(rank, (own_rows,), salt=i)).sum() for i, y in enumerate(ys)).backward()
    for i, x in enumerate(xs):
        expected = torch.cat([weights(r, (block(rows, r, size)[1],), salt=i)
                              for r in range(size)]) * size
        check(x.grad, expected, f"grouped reducescatter {i}")


def test_gradients_in_a_process_set(rank, size):
    members = list(range(size - 1))
    process_set = hvd.add_process_set(members)
    try:
        if rank in members:
            x = leaf(rank, (rank + 1, 2))
            y = hvd.allgather(x, process_set=process_set)
            total = sum(r + 1 for r in members)
            (y * weights(rank, (total, 2))).sum().backward()
            mean = sum(weights(r, (total, 2)) for r in members) / len(members)
            offset = sum(r + 1 for r in members[:rank])
            check(x.grad, mean[offset:offset + rank + 1], "allgather in a set")

            x = leaf(rank, (3,))
            (hvd.allreduce(x, op=hvd.Sum, process_set=process_set) *
             weights(rank, (3,))).sum().backward()
            check(x.grad, sum(weights(r, (3,)) for r in members), "allreduce in a set")
        hvd.barrier()
    finally:
        hvd.remove_process_set(process_set)
