"""herd.numpy's collectives against closed forms, under mpirun at 2 and 3 ranks.

Every rank builds rank-unique inputs from a formula (small integers, exact in every dtype, and
their sums, halves and products too), so each expected value is computed here from the formula
for every rank, never by herd. Sizes sweep the edges: a scalar, 0 elements, 1, counts not
divisible by the number of ranks, and about 1 MB. Many operations are submitted asynchronously
before the first is synchronized, which keeps the sweep quick and exercises several pending
names at once.

herd's arithmetic, from docs/collectives.md, which the references follow:
- integer sums and products wrap; Average truncates toward zero (with a postscale, one
  truncation of the sum times postscale / p); prescale and postscale multiply in double,
  truncate toward zero and saturate;
- floats reduce in their own precision (float16 in float32, rounded back after each pairwise
  step), Average multiplies by 1 / p, so it may be one rounding off sum / p.
"""

import gc
import math
import time

import numpy as np
import pytest

import herd
import herd.numpy as hnp
from herd import _native

DTYPES = [np.uint8, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
OPS = [herd.Sum, herd.Average, herd.Min, herd.Max, herd.Product]
SCALES = [(1.0, 1.0), (0.5, 3.0)]  # (prescale, postscale); halves are exact, truncated on integers
SHAPES = [(), (0,), (1,), (7,), (5, 3), (31,)]  # 7 and 31 divide by neither 2 nor 3
# Every op with each scale on the small shapes; on about 1 MB, each op once and one scaled case.
SMALL_CASES = [(op, pre, post) for op in OPS for pre, post in SCALES]
LARGE_CASES = [(op, 1.0, 1.0) for op in OPS] + [(herd.Average, 0.5, 3.0)]
# Relative tolerance for a float Average: two roundings (times 1 / p, times postscale) and a
# little more for 1 / p itself, rounded.
AVERAGE_RTOL = {np.float16: 3 * 2.0 ** -11, np.float32: 3 * 2.0 ** -24,
                np.float64: 3 * 2.0 ** -53}


def ids(values):
    return [np.dtype(v).name if isinstance(v, type) else str(v) for v in values]


def large_shape(dtype):
    """About 1 MB, an element count that leaves a remainder of 1 over 2 and over 3 ranks."""
    count = (1 << 20) // np.dtype(dtype).itemsize
    return (count - count % 6 + 1,)


def is_int(dtype):
    return np.issubdtype(dtype, np.integer)


def values(rank, shape, dtype, salt=0):
    """Rank-unique small integers as int64: -5..5 for signed types, 1..11 for uint8."""
    count = math.prod(shape)
    v = (np.arange(count, dtype=np.int64) * 7 + 3 * rank + salt) % 11
    v = v + 1 if dtype == np.uint8 else v - 5
    return v.reshape(shape)


def make(rank, shape, dtype, salt=0):
    return values(rank, shape, dtype, salt).astype(dtype)


def truncate(x):
    return np.sign(x) * np.floor(np.abs(x))


def scale_int(x, factor, dtype):
    """herd's integer scaling: in double, truncated toward zero, saturating."""
    if factor == 1.0:
        return x
    info = np.iinfo(dtype)
    return np.clip(truncate(np.asarray(x).astype(np.float64) * factor), info.min,
                   info.max).astype(np.int64)


def wrap(x, dtype):
    """int64 values reduced modulo 2 ** bits into dtype's range, as int64."""
    return x.astype(dtype).astype(np.int64)


def reduce_reference(per_rank, dtype, op, prescale=1.0, postscale=1.0, ranks=None):
    """op over the ranks' int64 inputs, with herd's scaling and integer rules, as dtype. An
    average divides by `ranks` (the set's size, joined ranks included), len(per_rank) if None."""
    p = len(per_rank) if ranks is None else ranks
    if is_int(dtype):
        scaled = [scale_int(x, prescale, dtype) for x in per_rank]
        if op == herd.Average and postscale != 1.0:
            # One truncation of sum * (postscale / p).
            return scale_int(wrap(sum(scaled), dtype), postscale / p, dtype).astype(dtype)
        if op in (herd.Sum, herd.Average):
            out = wrap(sum(scaled), dtype)
            if op == herd.Average:
                out = np.sign(out) * (np.abs(out) // p)  # truncates toward zero
        elif op == herd.Product:
            out = wrap(math.prod(scaled), dtype)
        elif op == herd.Min:
            out = np.minimum.reduce(scaled)
        else:
            out = np.maximum.reduce(scaled)
        return scale_int(out, postscale, dtype).astype(dtype)
    scaled = [x.astype(np.float64) * prescale for x in per_rank]
    if op in (herd.Sum, herd.Average):
        out = sum(scaled)
        if op == herd.Average:
            out = out / p
    elif op == herd.Product:
        out = math.prod(scaled)
    elif op == herd.Min:
        out = np.minimum.reduce(scaled)
    else:
        out = np.maximum.reduce(scaled)
    return (np.asarray(out) * postscale).astype(dtype)


def check(actual, expected, what, rtol=0.0):
    """Same dtype and shape, and equal values (within rtol relative); on failure names the
    rank, the first wrong index and both values."""
    where = f"rank {herd.rank()} {what}"
    assert isinstance(actual, np.ndarray), f"{where}: got {type(actual).__name__}"
    assert actual.dtype == expected.dtype, f"{where}: dtype {actual.dtype}, not {expected.dtype}"
    assert actual.shape == expected.shape, f"{where}: shape {actual.shape}, not {expected.shape}"
    if rtol:
        wrong = np.abs(actual.astype(np.float64) - expected.astype(np.float64)) > (
            rtol * np.abs(expected.astype(np.float64)))
    else:
        wrong = actual != expected
    if np.any(wrong):
        index = int(np.flatnonzero(wrong)[0])
        raise AssertionError(f"{where}: index {index}: expected {expected.reshape(-1)[index]}, "
                             f"got {actual.reshape(-1)[index]}")


def tolerance(dtype, op):
    return AVERAGE_RTOL[dtype] if op == herd.Average and not is_int(dtype) else 0.0


# --------------------------------------------------------------------------
# allreduce
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_allreduce_sweep(dtype, rank, size):
    """Every shape × op × scale, out of place and in place, all pending at once."""
    pending = []
    for shape, cases in [(s, SMALL_CASES) for s in SHAPES] + [(large_shape(dtype), LARGE_CASES)]:
        inputs = [values(r, shape, dtype) for r in range(size)]
        for op, prescale, postscale in cases:
            name = f"ar.{np.dtype(dtype).name}.{shape}.{op.name}.{prescale}"
            x = inputs[rank].astype(dtype)
            in_place = len(pending) % 2 == 1
            submit = hnp.allreduce_async_ if in_place else hnp.allreduce_async
            handle = submit(x, name=name, op=op, prescale_factor=prescale,
                            postscale_factor=postscale)
            expected = reduce_reference(inputs, dtype, op, prescale, postscale)
            pending.append((handle, x, in_place, expected, name, op))
    for handle, x, in_place, expected, name, op in pending:
        out = hnp.synchronize(handle)
        check(out, expected, name, tolerance(dtype, op))
        if in_place:
            assert out is x, f"{name}: allreduce_async_ must return the array it reduced"
        else:
            assert out is not x and not np.shares_memory(out, x)
            check(x, values(rank, x.shape, dtype).astype(dtype), name + " (input untouched)")


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_allreduce_blocking_forms(dtype, rank, size):
    shape = (5, 3)
    inputs = [values(r, shape, dtype, salt=1) for r in range(size)]
    x = inputs[rank].astype(dtype)
    check(hnp.allreduce(x, op=herd.Sum, name="arb.sum"),
          reduce_reference(inputs, dtype, herd.Sum), "allreduce Sum")
    check(hnp.allreduce(x, average=False, name="arb.avg_false"),
          reduce_reference(inputs, dtype, herd.Sum), "allreduce average=False")
    check(hnp.allreduce(x, average=True, name="arb.avg_true"),
          reduce_reference(inputs, dtype, herd.Average), "allreduce average=True",
          tolerance(dtype, herd.Average))
    check(hnp.allreduce(x, name="arb.default"),
          reduce_reference(inputs, dtype, herd.Average), "allreduce default op",
          tolerance(dtype, herd.Average))
    check(x, inputs[rank].astype(dtype), "input untouched")
    out = hnp.allreduce_(x, op=herd.Max, prescale_factor=0.5, postscale_factor=3.0,
                         name="arb.inplace")
    assert out is x
    check(x, reduce_reference(inputs, dtype, herd.Max, 0.5, 3.0), "allreduce_ Max scaled")


def test_float16_rounds_after_each_pairwise_step(rank, size):
    """Inputs that are not small integers: each pairwise step rounds to float16 (half an ulp
    of a partial sum at most), so with positive inputs the result is within (p - 1) half-ulps
    of the exact sum of the float16 inputs."""
    count = 4099
    x = (1.0 + np.arange(count) * 0.0137 + rank * 0.31).astype(np.float16)
    exact = sum((1.0 + np.arange(count) * 0.0137 + r * 0.31).astype(np.float16).astype(np.float64)
                for r in range(size))
    out = hnp.allreduce(x, op=herd.Sum, name="f16.steps")
    assert out.dtype == np.float16
    error = np.abs(out.astype(np.float64) - exact)
    assert np.all(error <= (size - 1) * 2.0 ** -11 * exact), float(np.max(error / exact))


def test_integer_rules(rank, size):
    """The integer rules spelled out: wraparound, truncating average, saturating scales."""
    # int16 sums wrap: 30000 per rank.
    out = hnp.allreduce(np.full(3, 30000, dtype=np.int16), op=herd.Sum, name="int.wrap")
    check(out, np.full(3, 30000 * size, dtype=np.int64).astype(np.int16), "int16 wrap")
    # Average of 7 and -7 on rank 0 only truncates toward zero: 7 // p and -(7 // p).
    x = np.array([7, -7] if rank == 0 else [0, 0], dtype=np.int32)
    check(hnp.allreduce(x, op=herd.Average, name="int.trunc"),
          np.array([7 // size, -(7 // size)], dtype=np.int32), "int average")
    # A postscale past the type's range saturates: 40 * p * 2 > 127.
    x = np.array([40, -40], dtype=np.int8)
    check(hnp.allreduce(x, op=herd.Sum, postscale_factor=2.0, name="int.saturate"),
          np.array([127, -128], dtype=np.int8), "int8 saturation")
    # uint8 products wrap modulo 256: 16 ** p.
    check(hnp.allreduce(np.full(2, 16, dtype=np.uint8), op=herd.Product, name="int.prod"),
          np.full(2, 16 ** size % 256, dtype=np.uint8), "uint8 product")


# --------------------------------------------------------------------------
# grouped allreduce
# --------------------------------------------------------------------------

GROUP_SHAPES = [(), (0,), (1,), (7,), (5, 3)]


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_grouped_allreduce(dtype, rank, size):
    per_member = [[values(r, shape, dtype, salt=i) for r in range(size)]
                  for i, shape in enumerate(GROUP_SHAPES)]
    arrays = [inputs[rank].astype(dtype) for inputs in per_member]
    cases = [(herd.Sum, 1.0, 1.0), (herd.Average, 0.5, 3.0), (herd.Min, 1.0, 1.0),
             (herd.Product, 0.5, 3.0)]
    handles = [hnp.grouped_allreduce_async(arrays, op=op, prescale_factor=pre,
                                           postscale_factor=post, name=f"grp.{op.name}")
               for op, pre, post in cases]
    for handle, (op, pre, post) in zip(handles, cases):
        outs = hnp.synchronize(handle)
        assert isinstance(outs, list) and len(outs) == len(arrays)
        for i, out in enumerate(outs):
            check(out, reduce_reference(per_member[i], dtype, op, pre, post),
                  f"group {op.name} member {i}", tolerance(dtype, op))
    outs = hnp.grouped_allreduce(arrays, average=False, name="grp.blocking")
    for i, out in enumerate(outs):
        check(out, reduce_reference(per_member[i], dtype, herd.Sum), f"blocking member {i}")
        check(arrays[i], per_member[i][rank].astype(dtype), f"member {i} input untouched")
    outs = hnp.grouped_allreduce_(arrays, op=herd.Max, name="grp.inplace")
    for i, out in enumerate(outs):
        assert out is arrays[i]
        check(out, reduce_reference(per_member[i], dtype, herd.Max), f"in place member {i}")


# --------------------------------------------------------------------------
# allgather
# --------------------------------------------------------------------------

def gather_input(rank, rows, trailing, dtype, salt=0):
    return make(rank, (rows,) + trailing, dtype, salt)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_allgather(dtype, rank, size):
    """First dimensions differ per rank (some 0); trailing dimensions agree."""
    big = large_shape(dtype)[0] // size
    cases = [  # (rows of rank r, trailing dims)
        (lambda r: r + 1, (3,)),
        (lambda r: r, ()),  # rank 0 sends nothing
        (lambda r: 0, (2,)),  # nobody sends anything
        (lambda r: 1, ()),
        (lambda r: 7 - r, (2, 2)),
        (lambda r: big + r, ()),
    ]
    pending = []
    for i, (rows, trailing) in enumerate(cases):
        x = gather_input(rank, rows(rank), trailing, dtype, salt=i)
        handle = hnp.allgather_async(x, name=f"ag.{i}")
        expected = np.concatenate([gather_input(r, rows(r), trailing, dtype, salt=i)
                                   for r in range(size)])
        pending.append((handle, expected, i))
    for handle, expected, i in pending:
        check(hnp.synchronize(handle), expected, f"allgather case {i}")
    x = gather_input(rank, rank + 2, (3,), dtype)
    check(hnp.allgather(x, name="ag.blocking"),
          np.concatenate([gather_input(r, r + 2, (3,), dtype) for r in range(size)]),
          "allgather blocking")


def _owner(array):
    """The object at the end of array's chain of bases."""
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return base.obj if isinstance(base, memoryview) else base


def test_allgather_result_is_a_zero_copy_view_that_outlives_the_handle(rank, size):
    x = gather_input(rank, rank + 1, (1000,), np.float64)
    expected = np.concatenate([gather_input(r, r + 1, (1000,), np.float64) for r in range(size)])
    handle = hnp.allgather_async(x, name="ag.lifetime")
    del x  # the handle keeps the input alive while herd reads it
    gc.collect()
    out = hnp.synchronize(handle)
    assert not out.flags.owndata
    assert isinstance(_owner(out), _native.Tensor), type(_owner(out))
    del handle
    gc.collect()
    # Memory freed now would be reused by these allocations and show up in out.
    junk = [np.full(out.shape, -1.0) for _ in range(4)]
    check(out, expected, "allgather result after gc")
    out[0, 0] = 42.0  # writable, as NumPy results usually are
    assert out[0, 0] == 42.0
    del junk
    # The same holds for alltoall and reducescatter, which return herd's buffer too.
    received, _ = hnp.alltoall(np.full((size, 3), rank, dtype=np.int32), splits=[1] * size,
                               name="a2a.lifetime")
    shard = hnp.reducescatter(np.ones((size, 3), dtype=np.int32), op=herd.Sum, name="rs.lifetime")
    gc.collect()
    assert isinstance(_owner(received), _native.Tensor)
    assert isinstance(_owner(shard), _native.Tensor)
    [np.zeros((size, 3), dtype=np.int32) for _ in range(4)]
    check(received, np.repeat(np.arange(size, dtype=np.int32), 3).reshape(size, 3), "alltoall")
    check(shard, np.full((1, 3), size, dtype=np.int32), "reducescatter")


# --------------------------------------------------------------------------
# broadcast
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_broadcast(dtype, rank, size):
    pending = []
    for shape in SHAPES + [large_shape(dtype)]:
        for root in range(size):
            x = make(rank, shape, dtype, salt=root)
            in_place = len(pending) % 2 == 1
            submit = hnp.broadcast_async_ if in_place else hnp.broadcast_async
            handle = submit(x, root, name=f"bc.{shape}.{root}")
            pending.append((handle, x, in_place, make(root, shape, dtype, salt=root), shape, root))
    for handle, x, in_place, expected, shape, root in pending:
        what = f"broadcast {shape} from {root}"
        out = hnp.synchronize(handle)
        check(out, expected, what)
        if in_place:
            assert out is x
        else:
            assert out is not x
            check(x, make(rank, shape, dtype, salt=root), what + " (input untouched)")
    x = make(rank, (4, 2), dtype)
    root = size - 1
    check(hnp.broadcast(x, root, name="bc.blocking"), make(root, (4, 2), dtype), "broadcast")
    check(x, make(rank, (4, 2), dtype), "broadcast input untouched")
    assert hnp.broadcast_(x, root, name="bc.blocking_") is x
    check(x, make(root, (4, 2), dtype), "broadcast_")


# --------------------------------------------------------------------------
# alltoall
# --------------------------------------------------------------------------

def alltoall_input(rank, rows, trailing, dtype):
    """Row i of rank r holds the value (10 r + i) mod 100 (then each trailing element the same),
    which says where each received row came from."""
    column = ((10 * rank + np.arange(rows)) % 100).astype(np.int64)
    return np.broadcast_to(column.reshape((rows,) + (1,) * len(trailing)),
                           (rows,) + trailing).astype(dtype)


def alltoall_expected(splits_of, rank, size, trailing, dtype):
    """Rows rank receives from each sender s: the splits_of(s)[rank] rows after
    sum(splits_of(s)[:rank])."""
    blocks = []
    for sender in range(size):
        splits = splits_of(sender)
        sent = alltoall_input(sender, sum(splits), trailing, dtype)
        start = sum(splits[:rank])
        blocks.append(sent[start:start + splits[rank]])
    return np.concatenate(blocks), np.array([splits_of(s)[rank] for s in range(size)],
                                            dtype=np.int32)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_alltoall(dtype, rank, size):
    big_rows = large_shape(dtype)[0] // (4 * size)
    cases = [  # (splits of rank s, trailing, splits passed as)
        (lambda s: [(s + 2 * j) % 3 for j in range(size)], (2,), list),  # uneven, some 0
        (lambda s: [(s + j) % 2 * 3 for j in range(size)], (), np.array),
        (lambda s: [0] * size, (3,), list),  # nothing to anyone
        (lambda s: [1] * size, (), list),
        (lambda s: [big_rows + s + j for j in range(size)], (4,), np.array),
    ]
    pending = []
    for i, (splits_of, trailing, as_type) in enumerate(cases):
        splits = splits_of(rank)
        x = alltoall_input(rank, sum(splits), trailing, dtype)
        handle = hnp.alltoall_async(x, splits=as_type(splits), name=f"a2a.{i}")
        pending.append((handle, alltoall_expected(splits_of, rank, size, trailing, dtype), i))
    for handle, (expected, expected_splits), i in pending:
        received, received_splits = hnp.synchronize(handle)
        check(received, expected, f"alltoall case {i}")
        check(received_splits, expected_splits, f"alltoall case {i} received splits")
    # Without splits: an even split, and only the received rows come back (Horovod's return).
    even = lambda s: [2] * size  # noqa: E731
    x = alltoall_input(rank, 2 * size, (3,), dtype)
    received = hnp.alltoall(x, name="a2a.even")
    check(received, alltoall_expected(even, rank, size, (3,), dtype)[0], "alltoall even")
    # With splits the blocking call returns both.
    uneven = cases[0][0]
    x = alltoall_input(rank, sum(uneven(rank)), (2,), dtype)
    received, received_splits = hnp.alltoall(x, splits=uneven(rank), name="a2a.blocking")
    expected, expected_splits = alltoall_expected(uneven, rank, size, (2,), dtype)
    check(received, expected, "alltoall blocking")
    check(received_splits, expected_splits, "alltoall blocking splits")


# --------------------------------------------------------------------------
# reducescatter
# --------------------------------------------------------------------------

def shard_rows(rows, rank, size):
    """Rank i gets rows // p rows, the first rows % p ranks one more, in rank order."""
    base, extra = divmod(rows, size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=ids(DTYPES))
def test_reducescatter(dtype, rank, size):
    big = large_shape(dtype)[0] // 4
    shapes = [(0,), (1,), (size - 1, 2), (7,), (2 * size + 1, 3)]
    pending = []
    for shape, cases in [(s, SMALL_CASES) for s in shapes] + [((big, 4), LARGE_CASES)]:
        inputs = [values(r, shape, dtype) for r in range(size)]
        start, stop = shard_rows(shape[0], rank, size)
        for op, prescale, postscale in cases:
            x = inputs[rank].astype(dtype)
            handle = hnp.reducescatter_async(
                x, name=f"rs.{shape}.{op.name}.{prescale}", op=op,
                prescale_factor=prescale, postscale_factor=postscale)
            expected = reduce_reference(inputs, dtype, op, prescale, postscale)[start:stop]
            pending.append((handle, x, expected, f"reducescatter {shape} {op.name}", op))
    for handle, x, expected, what, op in pending:
        check(hnp.synchronize(handle), expected, what, tolerance(dtype, op))
        check(x, values(rank, x.shape, dtype).astype(dtype), what + " (input untouched)")
    shape = (2 * size + 1, 3)
    inputs = [values(r, shape, dtype) for r in range(size)]
    start, stop = shard_rows(shape[0], rank, size)
    check(hnp.reducescatter(inputs[rank].astype(dtype), name="rs.default"),
          reduce_reference(inputs, dtype, herd.Average)[start:stop], "reducescatter default op",
          tolerance(dtype, herd.Average))


# --------------------------------------------------------------------------
# process sets, barrier, join, poll
# --------------------------------------------------------------------------

def test_process_set(rank, size):
    """A set of two ranks at 3 ranks ([0, 1]); at 2 ranks, the set [1], so that rank 0 is the
    outsider there."""
    members = [0, 1] if size >= 3 else [1]
    ps = herd.add_process_set(members)
    try:
        p = len(members)
        if rank in members:
            me = members.index(rank)
            x = make(rank, (7,), np.float32)
            ins = [values(r, (7,), np.float32) for r in members]
            check(hnp.allreduce(x, op=herd.Sum, name="ps.ar", process_set=ps),
                  reduce_reference(ins, np.float32, herd.Sum), "set allreduce")
            check(hnp.allreduce(x.astype(np.int32), name="ps.avg", process_set=ps),
                  reduce_reference(ins, np.int32, herd.Average), "set average divides by p")
            outs = hnp.grouped_allreduce([x, x[:3]], op=herd.Max, name="ps.grp", process_set=ps)
            check(outs[1], reduce_reference([i[:3] for i in ins], np.float32, herd.Max),
                  "set grouped")
            check(hnp.allgather(gather_input(rank, rank + 1, (2,), np.int16), name="ps.ag",
                                process_set=ps),
                  np.concatenate([gather_input(r, r + 1, (2,), np.int16) for r in members]),
                  "set allgather")
            root = members[-1]  # a global rank
            check(hnp.broadcast(x, root, name="ps.bc", process_set=ps),
                  make(root, (7,), np.float32), "set broadcast")
            splits_of = lambda s: [members.index(s) + j + 1 for j in range(p)]  # noqa: E731
            received, received_splits = hnp.alltoall(
                alltoall_input(rank, sum(splits_of(rank)), (), np.int64),
                splits=splits_of(rank), name="ps.a2a", process_set=ps)
            blocks = []
            for s in members:
                start = sum(splits_of(s)[:me])
                blocks.append(alltoall_input(s, sum(splits_of(s)), (), np.int64)
                              [start:start + splits_of(s)[me]])
            check(received, np.concatenate(blocks), "set alltoall")
            check(received_splits, np.array([splits_of(s)[me] for s in members], np.int32),
                  "set alltoall splits")
            rs_in = [values(r, (5, 2), np.int64) for r in members]
            start, stop = shard_rows(5, me, p)
            check(hnp.reducescatter(rs_in[me].astype(np.int64), op=herd.Sum, name="ps.rs",
                                    process_set=ps),
                  reduce_reference(rs_in, np.int64, herd.Sum)[start:stop], "set reducescatter")
            hnp.barrier(process_set=ps)
            if size >= 3:
                with pytest.raises(herd.Error, match="not in process set"):
                    hnp.broadcast(x, 2, name="ps.bad_root", process_set=ps)
        else:
            x = np.ones(3, dtype=np.float32)
            for call in (lambda: hnp.allreduce(x, name="ps.ar", process_set=ps),
                         lambda: hnp.allgather(x, name="ps.ag", process_set=ps),
                         lambda: hnp.broadcast(x, members[0], name="ps.bc", process_set=ps),
                         lambda: hnp.reducescatter(x, name="ps.rs", process_set=ps),
                         lambda: hnp.barrier(process_set=ps)):
                with pytest.raises(herd.Error, match="not in process set"):
                    call()
    finally:
        herd.remove_process_set(ps)
    # The global set goes on working for everyone.
    assert hnp.allreduce(np.ones(2), op=herd.Sum, name="ps.after").tolist() == [size] * 2


def test_barrier_waits_for_the_last_rank(rank, size):
    """Every rank leaves the barrier after the last one entered it (one machine: one clock)."""
    hnp.barrier()
    if rank == size - 1:
        time.sleep(0.2)
    entered = time.time()
    hnp.barrier()
    left = time.time()
    last_entered = hnp.allreduce(np.array([entered]), op=herd.Max, name="barrier.entered")[0]
    assert left >= last_entered, (left, last_entered)


def test_join(rank, size):
    """Rank 0 joins at once; the others reduce without it (it adds the op's identity, and an
    average still divides by every rank) and join later, the last rank last."""
    if rank == 0:
        assert hnp.join() == size - 1
    else:
        others = list(range(1, size))
        ins = [values(r, (7,), np.int32) for r in others]
        x = values(rank, (7,), np.int32).astype(np.int32)
        for op in OPS:
            for dtype in (np.int32, np.float32):
                check(hnp.allreduce(x.astype(dtype), op=op, name=f"join.{op.name}"),
                      reduce_reference(ins, dtype, op, ranks=size),
                      f"joined {op.name} {np.dtype(dtype).name}", tolerance(dtype, op))
        outs = hnp.grouped_allreduce([x, x[:2]], op=herd.Sum, name="join.grp")
        check(outs[1], reduce_reference([i[:2] for i in ins], np.int32, herd.Sum), "join group")
        # Any other collective fails while a rank is joined, naming it.
        with pytest.raises(herd.Error, match="joined"):
            hnp.allgather(x, name="join.ag")
        if rank == size - 1:
            time.sleep(0.3)
        assert hnp.join() == size - 1
    assert hnp.allreduce(np.ones(1), op=herd.Sum, name="join.after").tolist() == [size]


def test_poll_and_synchronize(rank, size):
    x = np.full(3, rank, dtype=np.int64)
    if rank == 0:
        time.sleep(0.2)  # the others' handles stay incomplete until rank 0 submits
    handle = hnp.allreduce_async(x, op=herd.Sum, name="poll")
    if rank != 0:
        assert hnp.poll(handle) is False
    deadline = time.monotonic() + 30
    while not hnp.poll(handle):
        assert time.monotonic() < deadline
        time.sleep(0.001)
    check(hnp.synchronize(handle), np.full(3, size * (size - 1) // 2, dtype=np.int64), "poll")
    with pytest.raises(ValueError, match="already synchronized"):
        hnp.synchronize(handle)


# --------------------------------------------------------------------------
# errors: each raises on every rank, and the next collective works
# --------------------------------------------------------------------------

def _works(size, name):
    assert hnp.allreduce(np.ones(2), op=herd.Sum, name=name).tolist() == [size] * 2


def _every_collective(array):
    """Each call of herd.numpy that takes one array, with the arguments it needs."""
    return {
        "allreduce": lambda: hnp.allreduce(array, name="err"),
        "allreduce_": lambda: hnp.allreduce_(array, name="err"),
        "allreduce_async": lambda: hnp.allreduce_async(array, name="err"),
        "grouped_allreduce": lambda: hnp.grouped_allreduce([array], name="err"),
        "grouped_allreduce_": lambda: hnp.grouped_allreduce_([array], name="err"),
        "allgather": lambda: hnp.allgather(array, name="err"),
        "broadcast": lambda: hnp.broadcast(array, 0, name="err"),
        "broadcast_": lambda: hnp.broadcast_(array, 0, name="err"),
        "alltoall": lambda: hnp.alltoall(array, name="err"),
        "reducescatter": lambda: hnp.reducescatter(array, name="err"),
    }


def test_refused_arrays(size):
    a = np.arange(24, dtype=np.float32).reshape(4, 6)
    refused = {
        "C-contiguous": [a[:, ::2], a.T, np.asfortranarray(a)],
        "numpy.ndarray": [[1.0, 2.0], 3.0, None],
        "does not reduce elements of type": [np.zeros(4, np.complex64), np.zeros(4, bool),
                                             np.zeros(4, object)],
        "byte order": [np.zeros(4, ">i4"), np.zeros(4, ">f8")],
    }
    for message, arrays in refused.items():
        for array in arrays:
            for call_name, call in _every_collective(array).items():
                with pytest.raises(ValueError, match=message):
                    call()
                    raise AssertionError(f"{call_name} accepted {array!r}")
    _works(size, "refused.after")


def test_read_only_arrays(rank, size):
    x = np.arange(4, dtype=np.float64)
    x.flags.writeable = False
    for call in (lambda: hnp.allreduce_(x, name="ro"),
                 lambda: hnp.allreduce_async_(x, name="ro"),
                 lambda: hnp.grouped_allreduce_([x], name="ro"),
                 lambda: hnp.broadcast_(x, 0, name="ro"),
                 lambda: hnp.broadcast_async_(x, 0, name="ro")):
        with pytest.raises(ValueError, match="read-only"):
            call()
    check(x, np.arange(4, dtype=np.float64), "read-only array untouched")
    # The out-of-place calls only read it.
    check(hnp.allreduce(x, op=herd.Sum, name="ro.ok"), np.arange(4) * float(size), "allreduce")
    check(hnp.broadcast(x, 0, name="ro.bc"), np.arange(4, dtype=np.float64), "broadcast")
    check(hnp.allgather(x, name="ro.ag"), np.tile(np.arange(4, dtype=np.float64), size),
          "allgather")


def test_disagreements_fail_on_every_rank(rank, size):
    """Arguments that differ between ranks fail the operation on wait, on every rank."""
    cases = {
        "shape mismatch": lambda: hnp.allreduce(np.zeros(rank + 1), name="dis.shape"),
        "dtype mismatch": lambda: hnp.allreduce(
            np.zeros(2, np.float32 if rank == 0 else np.float64), name="dis.dtype"),
        "op mismatch": lambda: hnp.allreduce(
            np.zeros(2), op=herd.Sum if rank == 0 else herd.Max, name="dis.op"),
        "prescale mismatch": lambda: hnp.allreduce(
            np.zeros(2), prescale_factor=1.0 + rank, name="dis.scale"),
        "root mismatch": lambda: hnp.broadcast(np.zeros(2), rank, name="dis.root"),
        "shape mismatch beyond the first dimension": lambda: hnp.allgather(
            np.zeros((2, rank + 1)), name="dis.ag"),
        "shapes mismatch": lambda: hnp.grouped_allreduce(
            [np.zeros(2), np.zeros(rank + 2)], name="dis.grp"),
        "collective mismatch": lambda: (hnp.allreduce if rank == 0 else hnp.allgather)(
            np.zeros(2), name="dis.coll"),
    }
    for message, call in cases.items():
        with pytest.raises(herd.Error, match=message):
            call()
        _works(size, "dis.after")
    # The failed names may be used again at once.
    check(hnp.allreduce(np.ones(2), op=herd.Sum, name="dis.shape"), np.full(2, float(size)),
          "name reused")
    # A failed reducescatter shape, asynchronously.
    handle = hnp.reducescatter_async(np.zeros((size + rank, 2)), name="dis.rs")
    with pytest.raises(herd.Error, match="shape mismatch"):
        hnp.synchronize(handle)
    _works(size, "dis.after")


def test_bad_arguments_raise_at_once(rank, size):
    x = np.zeros((size + 1, 2), dtype=np.float32)
    cases = [
        ("not a rank of this job", lambda: hnp.broadcast(x, size, name="bad.root")),
        ("not a rank of this job", lambda: hnp.broadcast_(x, -1, name="bad.root")),
        ("sum to", lambda: hnp.alltoall(x, splits=[1] * size, name="bad.splits")),
        ("give one per rank", lambda: hnp.alltoall(x, splits=[size + 1], name="bad.splits")),
        ("negative", lambda: hnp.alltoall(x, splits=[size + 2, -1] + [0] * (size - 2),
                                          name="bad.splits")),
        ("does not divide evenly", lambda: hnp.alltoall(x, name="bad.splits")),
        ("at least one dimension", lambda: hnp.allgather(np.ones(()), name="bad.scalar")),
        ("at least one dimension", lambda: hnp.alltoall(np.ones(()), name="bad.scalar")),
        ("at least one dimension", lambda: hnp.reducescatter(np.ones(()), name="bad.scalar")),
        ("must be finite", lambda: hnp.allreduce(x, prescale_factor=math.inf, name="bad.scale")),
        ("must be finite", lambda: hnp.reducescatter(x, postscale_factor=math.nan,
                                                     name="bad.scale")),
        ("differ in dtype", lambda: hnp.grouped_allreduce([x, x.astype(np.float64)],
                                                          name="bad.grp")),
        ("no tensors", lambda: hnp.grouped_allreduce([], name="bad.grp")),
    ]
    for message, call in cases:
        with pytest.raises(herd.Error, match=message):
            call()
    _works(size, "bad.after")
