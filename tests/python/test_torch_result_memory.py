"""herd.torch's results in recycled host memory, under mpirun at 2 and 3 ranks.

A CPU result of an out-of-place allreduce, grouped allreduce or broadcast at or above
mpi_ops._POOLED_RESULT_BYTES takes a block of herd's pool (_native.HostBuffer) that a dropped
result gave back. These tests check what that must never change: each result is right (from
closed forms), two live results never share memory, memory a view still uses is never handed
out again, a gradient still flows, and the pool keeps no more idle memory than its bound.
"""

import torch

import herd.torch as hvd
from herd import _native
from herd.torch import mpi_ops
from rank_checks import check_tensor as check, expect, rank_values

POOLED = mpi_ops._POOLED_RESULT_BYTES
DTYPES = [torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64]


def pooled_shape(dtype, extra=0):
    """A 2-D shape of at least the pooled size in ``dtype``."""
    rows = POOLED // (64 * torch.tensor([], dtype=dtype).element_size()) + extra
    return (rows, 64)


def summed(shape, dtype, size, salt=0):
    return sum(rank_values(r, shape, torch.int64, salt) for r in range(size)).to(dtype)


def test_results_of_every_dtype_are_right(rank, size):
    for dtype in DTYPES:
        shape = pooled_shape(dtype)
        for salt in range(3):  # the second and third take the block the first gave back
            result = hvd.allreduce(rank_values(rank, shape, dtype, salt), op=hvd.Sum,
                                   name=f"pooled.{dtype}")
            check(result, summed(shape, dtype, size, salt), f"{dtype} call {salt}")
            expect(result.is_contiguous() and result.dtype == dtype and
                   tuple(result.shape) == shape, f"{dtype}: {result.dtype} {result.shape}")
            del result


def test_a_dropped_result_is_recycled_and_live_ones_never_share(rank, size):
    _native.release_host_buffers()  # no idle block of this size but the one dropped below
    shape = pooled_shape(torch.float32)
    nbytes = shape[0] * shape[1] * 4
    first = hvd.allreduce(rank_values(rank, shape, torch.float32), op=hvd.Sum, name="share")
    address = first.data_ptr()
    second = hvd.allreduce(rank_values(rank, shape, torch.float32, 1), op=hvd.Sum,
                           name="share")
    expect(second.data_ptr() != address, "two live results share memory")
    check(first, summed(shape, torch.float32, size), "the first, after the second")
    check(second, summed(shape, torch.float32, size, 1), "the second")
    idle_before = _native.host_buffer_idle_bytes()
    del first
    expect(_native.host_buffer_idle_bytes() == idle_before + nbytes,
           f"the dropped result's block did not go back: {idle_before} idle bytes before, "
           f"{_native.host_buffer_idle_bytes()} after")
    third = hvd.allreduce(rank_values(rank, shape, torch.float32, 2), op=hvd.Sum, name="share")
    expect(third.data_ptr() == address, "the next result of that size took a new block")
    check(third, summed(shape, torch.float32, size, 2), "the recycled result")
    check(second, summed(shape, torch.float32, size, 1), "the second, after the third")


def test_memory_a_view_still_uses_is_not_handed_out(rank, size):
    shape = pooled_shape(torch.float64)
    result = hvd.allreduce(rank_values(rank, shape, torch.float64), op=hvd.Sum, name="view")
    address = result.data_ptr()
    row = result[3]
    array = result.numpy()
    del result
    later = hvd.allreduce(rank_values(rank, shape, torch.float64, 5), op=hvd.Sum, name="view")
    expect(later.data_ptr() != address, "a block still used by a view was handed out again")
    expected = summed(shape, torch.float64, size)
    check(row, expected[3], "the view of the dropped result")
    expect(bool((torch.from_numpy(array) == expected).all()), "the array of the dropped result")
    check(later, summed(shape, torch.float64, size, 5), "the later result")


def test_grouped_allreduce_and_broadcast_results(rank, size):
    shapes = [pooled_shape(torch.float32), (5,), pooled_shape(torch.float32, extra=3)]
    dtypes = [torch.float32] * 3
    for salt in range(2):
        results = hvd.grouped_allreduce(
            [rank_values(rank, s, d, salt) for s, d in zip(shapes, dtypes)], op=hvd.Sum,
            name="grouped")
        for i, (result, s, d) in enumerate(zip(results, shapes, dtypes)):
            check(result, summed(s, d, size, salt), f"grouped member {i}, call {salt}")
        del results

    shape = pooled_shape(torch.float32)
    for root in range(size):
        source = rank_values(rank, shape, torch.float32).t()  # not contiguous
        received = hvd.broadcast(source, root_rank=root, name="broadcast")
        check(received, rank_values(root, shape, torch.float32).t().contiguous(),
              f"broadcast from {root}")
        check(source, rank_values(rank, shape, torch.float32).t(), "the broadcast's input")


def test_gradient_through_a_pooled_result(rank, size):
    shape = pooled_shape(torch.float32)
    weights = rank_values(rank, shape, torch.float32).requires_grad_()
    reduced = hvd.allreduce(weights, op=hvd.Sum, name="grad")
    check(reduced.detach(), summed(shape, torch.float32, size), "forward")
    (reduced * 2).sum().backward()
    # The gradient of a Sum allreduce is the Sum allreduce of the incoming gradient.
    check(weights.grad, torch.full(shape, 2.0 * size), "gradient")
    with torch.no_grad():
        plain = hvd.allreduce(weights, op=hvd.Sum, name="grad.plain")
    expect(plain.grad_fn is None and not plain.requires_grad, "no_grad result has a grad_fn")


def test_idle_blocks_stay_within_the_bound():
    _native.release_host_buffers()
    expect(_native.host_buffer_idle_bytes() == 0, "idle blocks left after release")
    bound = _native.HOST_BUFFER_MAX_IDLE_BYTES
    # Untouched blocks: their pages are never mapped, so these cost no memory.
    part = bound // 3 + 64
    buffers = [_native.HostBuffer(part) for _ in range(3)]
    addresses = [b.address for b in buffers]
    while buffers:
        buffers.pop(0)  # returned first to last
    idle = _native.host_buffer_idle_bytes()
    expect(idle == 2 * part, f"{idle} idle bytes; expected the last two of 3 x {part} "
                             f"within {bound}")
    again = _native.HostBuffer(part)
    expect(again.address == addresses[2], "the block returned last was not the one taken")
    too_big = _native.HostBuffer(bound + 64)
    del too_big
    expect(_native.host_buffer_idle_bytes() == part and
           _native.HostBuffer(part).address == addresses[1],
           f"a block over the bound was kept: {_native.host_buffer_idle_bytes()} idle bytes")
    del again
    _native.release_host_buffers()
    expect(_native.host_buffer_idle_bytes() == 0, "idle blocks left after release")
    empty = _native.HostBuffer(0)
    expect(empty.nbytes == 0 and len(memoryview(empty)) == 0, "an empty buffer")
