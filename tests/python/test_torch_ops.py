"""herd.torch's collectives against closed forms, under mpirun at 2 and 3 ranks.

Every rank builds rank-unique inputs from a formula, so each expected value is
computed here from the formula for every rank, never by herd. Sizes sweep the
edges: a scalar, 0 elements, 1, counts not divisible by the number of ranks,
and a few MB. Every dtype herd takes, in place and out of place, blocking and
asynchronous.
"""

import math
import time

import pytest
import torch

import herd
import herd.torch as hvd
from rank_checks import check_tensor as check, expect, rank_values

ALL_DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
              torch.bfloat16, torch.float32, torch.float64]
FLOAT_DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
DTYPES = ALL_DTYPES
SHAPES = [(), (0,), (1,), (7,), (5, 3)]
LARGE = (1 << 20,)  # 4 MB of float32


def values(rank, shape, dtype, salt=0):
    return rank_values(rank, shape, dtype, salt)


def ones_and_twos(rank, shape, dtype):
    """Rank-unique 1s and 2s, whose products over 3 ranks fit every dtype."""
    count = math.prod(shape)
    v = (torch.arange(count, dtype=torch.int64) + rank) % 2 + 1
    return v.reshape(shape).to(dtype)


def reduce_reference(make, shape, dtype, op, size):
    """op over every rank's input, computed in int64 from the formula."""
    stacked = torch.stack([make(r, shape, torch.int64) for r in range(size)])
    if op == hvd.Sum:
        return stacked.sum(dim=0).to(dtype)
    if op == hvd.Average:
        total = stacked.sum(dim=0)
        if dtype.is_floating_point:
            return (total.to(torch.float64) / size).to(dtype)
        return torch.div(total, size, rounding_mode="trunc").to(dtype)
    if op == hvd.Min:
        return stacked.min(dim=0).values.to(dtype)
    if op == hvd.Max:
        return stacked.max(dim=0).values.to(dtype)
    return stacked.prod(dim=0).to(dtype)


def block(rows, index, parts):
    """(start, count) of the index-th block of rows: rows // parts each, the first
    rows % parts blocks one more."""
    base, extra = divmod(rows, parts)
    return index * base + min(index, extra), base + (1 if index < extra else 0)


def wait_polling(handle, seconds=60.0):
    """Polls until done (poll must turn True on its own), then synchronizes."""
    deadline = time.monotonic() + seconds
    while not hvd.poll(handle):
        assert time.monotonic() < deadline, "poll never turned True"
        time.sleep(0.001)
    assert hvd.poll(handle) is True
    return hvd.synchronize(handle)


# --------------------------------------------------------------------------
# The namespace
# --------------------------------------------------------------------------

def test_namespace_matches_horovod_torch(rank, size):
    for name in hvd.__all__:
        assert hasattr(hvd, name), name
    for name in ("broadcast_parameters", "broadcast_optimizer_state", "broadcast_object",
                 "allgather_object", "DistributedOptimizer", "Compression"):
        assert hasattr(hvd, name), name
    assert hvd.is_initialized()
    assert (hvd.rank(), hvd.size()) == (rank, size)
    assert 0 <= hvd.local_rank() < hvd.local_size() <= size
    assert 0 <= hvd.cross_rank() < hvd.cross_size() <= size
    assert hvd.mpi_enabled() and hvd.mpi_built()
    assert not hvd.gloo_enabled() and not hvd.gloo_built()
    assert hvd.cuda_built() is herd.cuda_built() is herd._native.cuda_built()
    assert hvd.nccl_built() == herd.nccl_built() == herd._native.nccl_version_code()
    assert bool(hvd.nccl_built()) is herd._native.nccl_built()
    assert hvd.cuda_built() or not hvd.nccl_built()  # NCCL only with CUDA
    assert not hvd.rocm_built()
    assert isinstance(hvd.mpi_threads_supported(), bool)
    assert hvd.HorovodInternalError is herd.Error and hvd.Error is herd.Error
    assert issubclass(herd.Error, RuntimeError)
    assert hvd.global_process_set.size() == size


# --------------------------------------------------------------------------
# Allreduce
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce_sum_every_shape(dtype, rank, size):
    for shape in SHAPES:
        expected = reduce_reference(values, shape, dtype, hvd.Sum, size)
        tensor = values(rank, shape, dtype)
        result = hvd.allreduce(tensor, op=hvd.Sum, name=f"sum.{dtype}.{shape}")
        check(result, expected, f"allreduce {shape}")
        check(tensor, values(rank, shape, dtype), "input left alone")

        returned = hvd.allreduce_(tensor, op=hvd.Sum)
        assert returned is tensor
        check(tensor, expected, f"allreduce_ {shape}")

        handle = hvd.allreduce_async(values(rank, shape, dtype), op=hvd.Sum)
        assert isinstance(handle, int)
        check(wait_polling(handle), expected, f"allreduce_async {shape}")

        tensor = values(rank, shape, dtype)
        assert hvd.synchronize(hvd.allreduce_async_(tensor, op=hvd.Sum)) is tensor
        check(tensor, expected, f"allreduce_async_ {shape}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", [hvd.Average, hvd.Min, hvd.Max, hvd.Product],
                         ids=["average", "min", "max", "product"])
def test_allreduce_ops(op, dtype, rank, size):
    make = ones_and_twos if op == hvd.Product else values
    for shape in [(0,), (1,), (7,), (4, 3)]:
        expected = reduce_reference(make, shape, dtype, op, size)
        close = op == hvd.Average
        check(hvd.allreduce(make(rank, shape, dtype), op=op), expected, f"{op} {shape}", close)
        tensor = make(rank, shape, dtype)
        hvd.allreduce_(tensor, op=op)
        check(tensor, expected, f"in-place {op} {shape}", close)


def test_allreduce_default_and_legacy_average(rank, size):
    shape = (6,)
    tensor = values(rank, shape, torch.float64)
    average = reduce_reference(values, shape, torch.float64, hvd.Average, size)
    total = reduce_reference(values, shape, torch.float64, hvd.Sum, size)
    check(hvd.allreduce(tensor), average, "default op", close=True)
    check(hvd.allreduce(tensor, average=True), average, "average=True", close=True)
    check(hvd.allreduce(tensor, average=False), total, "average=False")
    check(hvd.allreduce_(tensor.clone(), average=False), total, "allreduce_ average=False")
    check(hvd.grouped_allreduce([tensor], average=False)[0], total, "grouped average=False")
    with pytest.raises(ValueError):
        hvd.allreduce(tensor, average=True, op=hvd.Sum)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64])
def test_allreduce_prescale_postscale(dtype, rank, size):
    shape = (9,)
    if dtype.is_floating_point:
        pre, post = 0.5, 3.0
    else:
        pre, post = 2.0, 3.0  # integer factors keep integer results exact
    total = sum(values(r, shape, torch.float64) * pre for r in range(size)) * post
    expected = total.to(dtype)
    tensor = values(rank, shape, dtype)
    check(hvd.allreduce(tensor, op=hvd.Sum, prescale_factor=pre, postscale_factor=post),
          expected, "out of place")
    hvd.allreduce_(tensor, op=hvd.Sum, prescale_factor=pre, postscale_factor=post)
    check(tensor, expected, "in place")
    if dtype.is_floating_point:
        averaged = (total / size).to(dtype)
        result = hvd.allreduce(values(rank, shape, dtype), op=hvd.Average, prescale_factor=pre,
                               postscale_factor=post)
        expect(torch.allclose(result, averaged, rtol=1e-6), f"average {result} {averaged}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_allreduce_large(dtype, rank, size):
    expected = reduce_reference(values, LARGE, dtype, hvd.Sum, size)
    check(hvd.allreduce(values(rank, LARGE, dtype), op=hvd.Sum), expected, "out of place")
    tensor = values(rank, LARGE, dtype)
    hvd.allreduce_(tensor, op=hvd.Sum)
    check(tensor, expected, "in place")


def test_allreduce_non_contiguous(rank, size):
    base = values(rank, (4, 6), torch.float32)
    expected = reduce_reference(values, (4, 6), torch.float32, hvd.Sum, size)
    view = base.t()  # (6, 4), not contiguous
    assert not view.is_contiguous()
    check(hvd.allreduce(view, op=hvd.Sum), expected.t().contiguous(), "out of place")
    check(base, values(rank, (4, 6), torch.float32), "input left alone")

    returned = hvd.allreduce_(view, op=hvd.Sum)
    assert returned is view
    check(view.contiguous(), expected.t().contiguous(), "in place, the view")
    check(base, expected, "in place, the tensor under the view")

    column = values(rank, (5, 4), torch.int64)[:, 1]  # strided
    hvd.allreduce_(column, op=hvd.Max)
    check(column, reduce_reference(values, (5, 4), torch.int64, hvd.Max, size)[:, 1], "column")


def test_allreduce_named_concurrently(rank, size):
    handles = [hvd.allreduce_async(values(rank, (3,), torch.int32, salt=i), op=hvd.Sum,
                                   name=f"named.{i}") for i in range(8)]
    for i, handle in enumerate(handles):
        total = sum(values(r, (3,), torch.int64, salt=i) for r in range(size))
        check(hvd.synchronize(handle), total.to(torch.int32), f"named.{i}")


def test_allreduce_fp16_compression(rank, size):
    tensor = values(rank, (10,), torch.float32)
    expected = reduce_reference(values, (10,), torch.float32, hvd.Sum, size)
    result = hvd.allreduce(tensor, op=hvd.Sum, compression=hvd.Compression.fp16)
    check(result, expected, "fp16 compression")
    check(hvd.allreduce(tensor, op=hvd.Sum, compression=hvd.Compression.none), expected, "none")
    ints = values(rank, (4,), torch.int32)  # fp16 leaves integers alone
    check(hvd.allreduce(ints, op=hvd.Sum, compression=hvd.Compression.fp16),
          reduce_reference(values, (4,), torch.int32, hvd.Sum, size), "ints")
    grouped = hvd.grouped_allreduce([tensor, tensor.double()], op=hvd.Sum,
                                    compression=hvd.Compression.fp16)
    check(grouped[0], expected, "grouped fp16")
    check(grouped[1], expected.double(), "grouped fp16, float64")


# --------------------------------------------------------------------------
# Grouped allreduce
# --------------------------------------------------------------------------

def test_grouped_allreduce(rank, size):
    # One dtype per group: herd's core, like Horovod's, fuses a group into one buffer.
    specs = [((3,), torch.float32), ((0,), torch.float32), ((2, 5), torch.float32),
             ((), torch.float32), ((7,), torch.float32), ((1,), torch.float32)]
    expected = [reduce_reference(values, s, d, hvd.Sum, size) for s, d in specs]
    tensors = [values(rank, s, d) for s, d in specs]

    results = hvd.grouped_allreduce(tensors, op=hvd.Sum, name="group")
    assert isinstance(results, list) and len(results) == len(specs)
    for result, want in zip(results, expected):
        check(result, want, "grouped_allreduce")
    for tensor, (s, d) in zip(tensors, specs):
        check(tensor, values(rank, s, d), "inputs left alone")

    for result, want in zip(wait_polling(hvd.grouped_allreduce_async(tensors, op=hvd.Sum)),
                            expected):
        check(result, want, "grouped_allreduce_async")

    returned = hvd.grouped_allreduce_(tensors, op=hvd.Sum)
    for tensor, returned_tensor, want in zip(tensors, returned, expected):
        assert returned_tensor is tensor
        check(tensor, want, "grouped_allreduce_")

    tensors = [values(rank, s, d) for s, d in specs]
    hvd.synchronize(hvd.grouped_allreduce_async_(tensors, op=hvd.Sum))
    for tensor, want in zip(tensors, expected):
        check(tensor, want, "grouped_allreduce_async_")

    averaged = hvd.grouped_allreduce([values(rank, (4,), torch.float64)], op=hvd.Average,
                                     prescale_factor=2.0, postscale_factor=0.5)
    check(averaged[0], reduce_reference(values, (4,), torch.float64, hvd.Average, size),
          "grouped average with scales", close=True)


# --------------------------------------------------------------------------
# Allgather
# --------------------------------------------------------------------------

def gather_reference(rows_of, trailing, dtype, size):
    return torch.cat([values(r, (rows_of(r),) + trailing, dtype) for r in range(size)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_allgather_every_dtype(dtype, rank, size):
    cases = [(lambda r: r, (3,)),           # rank 0 sends no rows
             (lambda r: 1, ()),             # one element each
             (lambda r: 2 * r + 1, (2, 2)),  # ranks differ in the first dimension
             (lambda r: 0, (4,))]           # nobody sends anything
    for rows_of, trailing in cases:
        expected = gather_reference(rows_of, trailing, dtype, size)
        tensor = values(rank, (rows_of(rank),) + trailing, dtype)
        check(hvd.allgather(tensor), expected, f"allgather {trailing}")
        check(wait_polling(hvd.allgather_async(tensor, name=f"ag.{dtype}.{trailing}")),
              expected, f"allgather_async {trailing}")


def test_allgather_large_non_contiguous_and_bool(rank, size):
    expected = gather_reference(lambda r: LARGE[0] // 4, (), torch.float32, size)
    check(hvd.allgather(values(rank, (LARGE[0] // 4,), torch.float32)), expected, "large")

    base = values(rank, (3, 2 + rank), torch.int32)
    column_block = base.t()  # (2 + rank, 3), not contiguous
    expected = torch.cat([values(r, (3, 2 + r), torch.int32).t() for r in range(size)])
    check(hvd.allgather(column_block), expected, "non-contiguous")

    flags = torch.tensor([rank % 2 == 0, True, rank == 0])
    expected = torch.tensor([v for r in range(size) for v in (r % 2 == 0, True, r == 0)])
    check(hvd.allgather(flags), expected, "bool")


def test_grouped_allgather(rank, size):
    tensors = [values(rank, (rank + 1, 2), torch.float32), values(rank, (rank,), torch.int64)]
    expected = [gather_reference(lambda r: r + 1, (2,), torch.float32, size),
                gather_reference(lambda r: r, (), torch.int64, size)]
    for result, want in zip(hvd.grouped_allgather(tensors, name="gag"), expected):
        check(result, want, "grouped_allgather")
    for result, want in zip(wait_polling(hvd.grouped_allgather_async(tensors)), expected):
        check(result, want, "grouped_allgather_async")


# --------------------------------------------------------------------------
# Broadcast
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_broadcast_every_dtype(dtype, rank, size):
    for root in range(size):
        for shape in SHAPES:
            expected = values(root, shape, dtype)
            tensor = values(rank, shape, dtype)
            check(hvd.broadcast(tensor, root), expected, f"broadcast root {root} {shape}")
            check(tensor, values(rank, shape, dtype), "input left alone")
            assert hvd.broadcast_(tensor, root_rank=root, name=f"b.{root}.{shape}") is tensor
            check(tensor, expected, f"broadcast_ root {root} {shape}")
        check(wait_polling(hvd.broadcast_async(values(rank, (5,), dtype), root)),
              values(root, (5,), dtype), "broadcast_async")
        tensor = values(rank, (5,), dtype)
        assert hvd.synchronize(hvd.broadcast_async_(tensor, root)) is tensor
        check(tensor, values(root, (5,), dtype), "broadcast_async_")


def test_broadcast_large_non_contiguous_and_bool(rank, size):
    root = size - 1
    tensor = values(rank, LARGE, torch.float32)
    hvd.broadcast_(tensor, root)
    check(tensor, values(root, LARGE, torch.float32), "large")

    base = values(rank, (3, 4), torch.int64)
    view = base.t()
    check(hvd.broadcast(view, root), values(root, (3, 4), torch.int64).t().contiguous(), "view")
    hvd.broadcast_(view, root)
    check(base, values(root, (3, 4), torch.int64), "in place through a view")

    flags = torch.tensor([rank == 0, rank != 0])
    hvd.broadcast_(flags, 0)
    check(flags, torch.tensor([True, False]), "bool")


# --------------------------------------------------------------------------
# Alltoall
# --------------------------------------------------------------------------

def a2a_rows(sender, receiver, size):
    """Rows ``sender`` sends ``receiver``: 0, 1 or 2, so some pairs send nothing."""
    return (sender + 2 * receiver) % 3


def a2a_block(sender, receiver, size, trailing, dtype):
    """The rows ``sender`` sends ``receiver``; each value names both ends and the row."""
    rows = a2a_rows(sender, receiver, size)
    code = (sender * size + receiver) * 4 + torch.arange(rows, dtype=torch.int64)
    return code.reshape((rows,) + (1,) * len(trailing)).expand((rows,) + trailing).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_alltoall_every_dtype(dtype, rank, size):
    for trailing in [(), (3,)]:
        splits = [a2a_rows(rank, j, size) for j in range(size)]
        tensor = torch.cat([a2a_block(rank, j, size, trailing, dtype) for j in range(size)])
        expected = torch.cat([a2a_block(s, rank, size, trailing, dtype) for s in range(size)])
        expected_splits = [a2a_rows(s, rank, size) for s in range(size)]

        received, received_splits = hvd.alltoall(tensor, splits=splits)
        check(received, expected, f"alltoall {trailing}")
        check(received_splits, torch.tensor(expected_splits, dtype=torch.int32), "splits")

        received, received_splits = hvd.alltoall(tensor, torch.tensor(splits, dtype=torch.int64),
                                                 name=f"a2a.{dtype}.{trailing}")
        check(received, expected, "tensor splits")
        check(received_splits, torch.tensor(expected_splits, dtype=torch.int64),
              "splits keep the dtype of a splits tensor")

        received, received_splits = wait_polling(hvd.alltoall_async(tensor, splits))
        check(received, expected, "alltoall_async")
        check(received_splits, torch.tensor(expected_splits, dtype=torch.int32), "async splits")


def test_alltoall_even_split(rank, size):
    rows_per_rank = 2
    tensor = values(rank, (rows_per_rank * size, 3), torch.float32)
    result = hvd.alltoall(tensor)
    assert isinstance(result, torch.Tensor), "without splits Horovod returns the tensor alone"
    expected = torch.cat([values(s, (rows_per_rank * size, 3), torch.float32)
                          [rank * rows_per_rank:(rank + 1) * rows_per_rank] for s in range(size)])
    check(result, expected, "even split")
    received, received_splits = hvd.synchronize(hvd.alltoall_async(tensor))
    check(received, expected, "even split, async")
    check(received_splits, torch.full((size,), rows_per_rank, dtype=torch.int32), "splits")

    large = values(rank, (size * (LARGE[0] // 4),), torch.float32)
    part = LARGE[0] // 4
    expected = torch.cat([values(s, (size * part,), torch.float32)[rank * part:(rank + 1) * part]
                          for s in range(size)])
    check(hvd.alltoall(large), expected, "large")
    empty = torch.empty(0, 2, dtype=torch.int32)
    check(hvd.alltoall(empty), empty, "0 rows")


# --------------------------------------------------------------------------
# Reducescatter
# --------------------------------------------------------------------------

def reducescatter_reference(shape, dtype, op, rank, size, pre=1.0, post=1.0):
    start, count = block(shape[0], rank, size)
    if pre == 1.0 and post == 1.0:
        full = reduce_reference(values, shape, dtype, op, size)
    else:
        total = sum(values(r, shape, torch.float64) * pre for r in range(size))
        full = (total / (size if op == hvd.Average else 1) * post).to(dtype)
    return full[start:start + count]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reducescatter_every_dtype(dtype, rank, size):
    for shape in [(7,), (7, 2), (1, 3), (0, 2), (size,), (2 * size + 1,)]:
        for op in (hvd.Sum, hvd.Average):
            expected = reducescatter_reference(shape, dtype, op, rank, size)
            tensor = values(rank, shape, dtype)
            close = op == hvd.Average
            check(hvd.reducescatter(tensor, op=op), expected, f"{op} {shape}", close)
            check(tensor, values(rank, shape, dtype), "input left alone")
            check(wait_polling(hvd.reducescatter_async(tensor, name=f"rs.{dtype}.{shape}.{op}",
                                                       op=op)),
                  expected, f"async {op} {shape}", close)


def test_reducescatter_default_scales_large_and_views(rank, size):
    shape = (8, 3)
    check(hvd.reducescatter(values(rank, shape, torch.float64)),
          reducescatter_reference(shape, torch.float64, hvd.Average, rank, size), "default op",
          close=True)
    for op in (hvd.Sum, hvd.Average):
        result = hvd.reducescatter(values(rank, shape, torch.float64), op=op,
                                   prescale_factor=0.5, postscale_factor=3.0)
        expected = reducescatter_reference(shape, torch.float64, op, rank, size, 0.5, 3.0)
        expect(torch.allclose(result, expected, rtol=1e-12), f"{op}: {result} {expected}")
    check(hvd.reducescatter(values(rank, LARGE, torch.float32), op=hvd.Sum),
          reducescatter_reference(LARGE, torch.float32, hvd.Sum, rank, size), "large")
    view = values(rank, (3, 7), torch.int32).t()
    full = reduce_reference(values, (3, 7), torch.int32, hvd.Sum, size).t()
    start, count = block(7, rank, size)
    check(hvd.reducescatter(view, op=hvd.Sum), full[start:start + count].contiguous(), "view")
    result = hvd.reducescatter(values(rank, (9,), torch.float32), op=hvd.Sum,
                               compression=hvd.Compression.fp16)
    check(result, reducescatter_reference((9,), torch.float32, hvd.Sum, rank, size), "fp16")


def test_grouped_reducescatter(rank, size):
    specs = [((5, 2), torch.float32), ((size + 1,), torch.int64)]
    tensors = [values(rank, s, d) for s, d in specs]
    for op in (hvd.Sum, hvd.Average):
        results = hvd.grouped_reducescatter(tensors, op=op, name=f"grs.{op}")
        for result, (s, d) in zip(results, specs):
            check(result, reducescatter_reference(s, d, op, rank, size), f"grouped {op}",
                  close=op == hvd.Average)
    results = wait_polling(hvd.grouped_reducescatter_async(tensors, op=hvd.Sum))
    for result, (s, d) in zip(results, specs):
        check(result, reducescatter_reference(s, d, hvd.Sum, rank, size), "async")


# --------------------------------------------------------------------------
# Everything at once
# --------------------------------------------------------------------------

def test_mixed_async_operations_in_flight(rank, size):
    """Several kinds of collectives pending together, synchronized in reverse order."""
    shape = (6, 2)
    handles = [
        hvd.allreduce_async(values(rank, shape, torch.float32), op=hvd.Sum, name="mix.ar"),
        hvd.allgather_async(values(rank, (rank + 1, 2), torch.int32), name="mix.ag"),
        hvd.broadcast_async(values(rank, shape, torch.int64), size - 1, name="mix.bc"),
        hvd.alltoall_async(values(rank, (size * 2,), torch.float64), name="mix.a2a"),
        hvd.reducescatter_async(values(rank, shape, torch.float32), op=hvd.Sum, name="mix.rs"),
        hvd.grouped_allreduce_async([values(rank, (3,), torch.int32)], op=hvd.Max, name="mix.g"),
    ]
    assert len(set(handles)) == len(handles)
    results = [hvd.synchronize(h) for h in reversed(handles)][::-1]
    check(results[0], reduce_reference(values, shape, torch.float32, hvd.Sum, size), "ar")
    check(results[1], gather_reference(lambda r: r + 1, (2,), torch.int32, size), "ag")
    check(results[2], values(size - 1, shape, torch.int64), "bc")
    expected = torch.cat([values(s, (size * 2,), torch.float64)[2 * rank:2 * rank + 2]
                          for s in range(size)])
    check(results[3][0], expected, "a2a")
    check(results[4], reducescatter_reference(shape, torch.float32, hvd.Sum, rank, size), "rs")
    check(results[5][0], reduce_reference(values, (3,), torch.int32, hvd.Max, size), "grouped")
