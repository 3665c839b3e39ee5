"""herd.torch's process sets, join, barrier, handles and error paths, under mpirun.

Each error case must raise on every rank it concerns, and the collectives
after it must still work (checked right after each one). Expected values are
closed forms of the rank-unique inputs.
"""


import pytest
import torch

import herd
import herd.torch as hvd
from rank_checks import expect, rank_values


def values(rank, shape, dtype):
    return rank_values(rank, shape, dtype)


def check(actual, expected, what=""):
    expect(actual.dtype == expected.dtype and actual.shape == expected.shape
           and torch.equal(actual, expected),
           f"{what}: expected {expected.tolist()} ({expected.dtype}), got {actual.tolist()} "
           f"({actual.dtype})")


def still_works(rank, size, what):
    """A global allreduce after an error: every rank must get the exact sum."""
    total = sum(values(r, (5,), torch.int64) for r in range(size))
    check(hvd.allreduce(values(rank, (5,), torch.int64), op=hvd.Sum), total, f"after {what}")


# --------------------------------------------------------------------------
# Process sets: the ranks but the last form a set; the last rank stays out
# --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def member_set():
    members = list(range(hvd.size() - 1))
    process_set = hvd.add_process_set(members)
    yield process_set
    assert hvd.remove_process_set(process_set)


def test_process_set_basics(member_set, rank, size):
    members = list(range(size - 1))
    assert member_set.ranks == members
    assert member_set.process_set_id is not None and member_set.process_set_id != 0
    assert member_set.size() == len(members)
    assert member_set.included() == (rank in members)
    assert member_set.rank() == (rank if rank in members else -1)


def test_process_set_collectives(member_set, rank, size):
    members = list(range(size - 1))
    if rank not in members:
        with pytest.raises(herd.Error, match="not in process set"):
            hvd.allreduce(values(rank, (3,), torch.float32), process_set=member_set)
        hvd.barrier()
        return

    def over_members(shape, dtype):
        return sum(values(r, shape, torch.int64) for r in members).to(dtype)

    check(hvd.allreduce(values(rank, (4,), torch.float32), op=hvd.Sum, process_set=member_set),
          over_members((4,), torch.float32), "allreduce")
    tensor = values(rank, (4,), torch.int32)
    hvd.allreduce_(tensor, op=hvd.Sum, process_set=member_set)
    check(tensor, over_members((4,), torch.int32), "allreduce_")
    grouped = hvd.grouped_allreduce([values(rank, (2,), torch.int64)], op=hvd.Sum,
                                    process_set=member_set)
    check(grouped[0], over_members((2,), torch.int64), "grouped_allreduce")
    average = hvd.allreduce(values(rank, (4,), torch.float64), process_set=member_set)
    expect(torch.allclose(average, over_members((4,), torch.float64) / len(members)),
           f"average {average}")

    gathered = hvd.allgather(values(rank, (rank + 1, 2), torch.int32), process_set=member_set)
    check(gathered, torch.cat([values(r, (r + 1, 2), torch.int32) for r in members]),
          "allgather")

    root = members[-1]
    check(hvd.broadcast(values(rank, (3,), torch.int8), root, process_set=member_set),
          values(root, (3,), torch.int8), "broadcast")

    tensor = values(rank, (2 * len(members),), torch.float32)
    index = member_set.rank()
    check(hvd.alltoall(tensor, process_set=member_set),
          torch.cat([values(r, (2 * len(members),), torch.float32)[2 * index:2 * index + 2]
                     for r in members]), "alltoall")

    rows = 2 * len(members) + 1
    base, extra = divmod(rows, len(members))
    start = index * base + min(index, extra)
    count = base + (1 if index < extra else 0)
    check(hvd.reducescatter(values(rank, (rows,), torch.int64), op=hvd.Sum,
                            process_set=member_set),
          over_members((rows,), torch.int64)[start:start + count], "reducescatter")
    hvd.barrier(process_set=member_set)
    hvd.barrier()


def test_process_set_objects(member_set, rank, size):
    members = list(range(size - 1))
    if rank in members:
        everyone = hvd.allgather_object({"rank": rank}, process_set=member_set)
        expect(everyone == [{"rank": r} for r in members], f"allgather_object {everyone}")
        received = hvd.broadcast_object(f"from {rank}", root_rank=members[-1],
                                        process_set=member_set)
        expect(received == f"from {members[-1]}", f"broadcast_object {received}")
    hvd.barrier()


def test_unregistered_process_set_is_refused(rank, size):
    loose = hvd.ProcessSet([0])
    with pytest.raises(ValueError, match="not registered"):
        hvd.allreduce(torch.ones(2), process_set=loose)
    with pytest.raises(ValueError):
        hvd.allreduce(torch.ones(2), process_set=[0])
    still_works(rank, size, "unregistered process set")


# --------------------------------------------------------------------------
# Join and barrier
# --------------------------------------------------------------------------

def test_join_returns_the_last_rank_and_joined_ranks_contribute_nothing(rank, size):
    last = size - 1
    if rank == last:
        # The others are joined (or about to): they add zeros, and an average still divides
        # by every rank, as Horovod's: float32 times 1/size rounded to float32, integers
        # divided truncating toward zero (values 1..11, negated for the signs).
        mine = values(rank, (4,), torch.float32)
        check(hvd.allreduce(mine, op=hvd.Sum, name="join.sum"), mine, "sum while joined")
        reciprocal = torch.tensor(1.0 / size, dtype=torch.float64).to(torch.float32)
        check(hvd.allreduce(mine, op=hvd.Average, name="join.avg"), mine * reciprocal,
              "float32 average")
        for dtype in (torch.int32, torch.int64):
            ints = torch.cat([values(rank, (4,), dtype), -values(rank, (4,), dtype)])
            expected = torch.tensor([int(v / size) for v in ints.tolist()], dtype=dtype)
            check(hvd.allreduce(ints, op=hvd.Average, name=f"join.avg.{dtype}"), expected,
                  f"{dtype} average")
    assert hvd.join() == last
    still_works(rank, size, "join")
    with pytest.raises(ValueError, match="give -1"):
        hvd.join(device=-2)
    if not hvd.cuda_built():
        with pytest.raises(ValueError, match="without GPU support"):
            hvd.join(device=0)


def test_barrier(rank, size):
    for _ in range(3):
        hvd.barrier()
    hvd.barrier(process_set=hvd.global_process_set)
    still_works(rank, size, "barrier")


# --------------------------------------------------------------------------
# Handles
# --------------------------------------------------------------------------

def test_unknown_and_spent_handles(rank, size):
    with pytest.raises(ValueError, match="unknown"):
        hvd.synchronize(987654321)
    with pytest.raises(ValueError, match="unknown"):
        hvd.poll(987654321)
    handle = hvd.allreduce_async(torch.ones(3), op=hvd.Sum)
    check(hvd.synchronize(handle), torch.full((3,), float(size)), "first synchronize")
    with pytest.raises(ValueError):
        hvd.synchronize(handle)
    still_works(rank, size, "spent handle")


# --------------------------------------------------------------------------
# Disagreements between ranks: every rank's synchronize raises herd.Error
# --------------------------------------------------------------------------

def test_shape_mismatch(rank, size):
    with pytest.raises(herd.Error, match="shape"):
        hvd.allreduce(torch.ones(rank + 1), name="mismatch.shape")
    with pytest.raises(herd.Error, match="shape"):
        hvd.allreduce_(torch.ones(2, rank + 1), name="mismatch.shape")
    with pytest.raises(herd.Error):
        hvd.allgather(torch.ones(2, rank + 1), name="mismatch.trailing")
    with pytest.raises(herd.Error):
        hvd.reducescatter(torch.ones(rank + 2), name="mismatch.rs")
    # The same name, agreed this time, works.
    check(hvd.allreduce(torch.ones(2), op=hvd.Sum, name="mismatch.shape"),
          torch.full((2,), float(size)), "the name reused")
    still_works(rank, size, "shape mismatch")


def test_dtype_op_scale_and_root_mismatch(rank, size):
    dtype = torch.float32 if rank == 0 else torch.float64
    with pytest.raises(herd.Error, match="dtype"):
        hvd.allreduce(torch.ones(3, dtype=dtype), name="mismatch.dtype")
    op = hvd.Sum if rank == 0 else hvd.Max
    with pytest.raises(herd.Error, match="op"):
        hvd.allreduce(torch.ones(3), op=op, name="mismatch.op")
    with pytest.raises(herd.Error):
        hvd.allreduce(torch.ones(3), op=hvd.Sum, prescale_factor=1.0 + rank,
                      name="mismatch.scale")
    with pytest.raises(herd.Error, match="root"):
        hvd.broadcast(torch.ones(3), root_rank=rank, name="mismatch.root")
    still_works(rank, size, "mismatches")


# --------------------------------------------------------------------------
# Misuse found on the calling rank: raised by the call itself
# --------------------------------------------------------------------------

def test_bad_root(rank, size):
    for root in (size, -1):
        with pytest.raises(herd.Error, match="root"):
            hvd.broadcast(torch.ones(2), root)
        with pytest.raises(herd.Error, match="root"):
            hvd.broadcast_async_(torch.ones(2), root)
    still_works(rank, size, "bad root")


def test_bad_splits(rank, size):
    tensor = torch.ones(size, 2)
    with pytest.raises(herd.Error, match="splits"):
        hvd.alltoall(tensor, splits=[1] * (size + 1))
    with pytest.raises(herd.Error, match="negative"):
        hvd.alltoall(tensor, splits=[-1, size + 1] + [0] * (size - 2))
    with pytest.raises(herd.Error, match="sum"):
        hvd.alltoall(tensor, splits=[1] * (size - 1) + [2])
    with pytest.raises(herd.Error, match="evenly"):
        hvd.alltoall(torch.ones(size + 1))
    with pytest.raises(ValueError, match="integers"):
        hvd.alltoall(tensor, splits=torch.ones(size))
    still_works(rank, size, "bad splits")


def test_scalars_where_rows_are_needed(rank, size):
    scalar = torch.tensor(1.0)
    with pytest.raises(herd.Error):
        hvd.allgather(scalar)
    with pytest.raises(herd.Error):
        hvd.reducescatter(scalar)
    with pytest.raises(herd.Error):
        hvd.alltoall(scalar)
    still_works(rank, size, "scalars")


def test_mixed_dtypes_in_a_group(rank, size):
    with pytest.raises(herd.Error, match="dtype"):
        hvd.grouped_allreduce([torch.ones(2), torch.ones(2, dtype=torch.float64)])
    with pytest.raises(ValueError, match="at least one"):
        hvd.grouped_allreduce_([])
    still_works(rank, size, "mixed group")


def test_unsupported_tensors(rank, size):
    with pytest.raises(ValueError, match="bool"):
        hvd.allreduce(torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match="bool"):
        hvd.reducescatter(torch.ones(2, dtype=torch.bool))
    with pytest.raises(ValueError, match="complex"):
        hvd.broadcast(torch.ones(2, dtype=torch.complex64), 0)
    # Neither CPU nor CUDA: refused with what this build takes.
    accepted = "CPU and CUDA tensors" if hvd.cuda_built() else "without GPU support"
    with pytest.raises(ValueError, match=f"is on meta; .*{accepted}"):
        hvd.allreduce(torch.ones(2, device="meta"))
    with pytest.raises(ValueError, match=f"is on meta; .*{accepted}"):
        hvd.allgather_async(torch.ones(2, device="meta"))
    with pytest.raises(ValueError, match="sparse"):
        hvd.allreduce(torch.ones(2).to_sparse())
    with pytest.raises(TypeError):
        hvd.allreduce([1.0, 2.0])
    still_works(rank, size, "unsupported tensors")


def test_bad_operators(rank, size):
    tensor = torch.ones(4)
    # Adasum's own refusals are in test_adasum.py.
    with pytest.raises(NotImplementedError, match="Adasum"):
        hvd.reducescatter(tensor, op=hvd.Adasum)
    with pytest.raises(ValueError):
        hvd.allreduce(tensor, op=hvd.Sum, average=False)
    with pytest.raises(ValueError):
        hvd.allreduce(tensor, op="sum")
    still_works(rank, size, "bad operators")
