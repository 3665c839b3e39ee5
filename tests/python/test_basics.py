"""herd's top level under mpirun at 2 and 3 ranks, and at 2 across two emulated hosts
(tests/multihost): the job's shape, init, errors, process sets, operator resolution, the handle
table, automatic names, and that blocking calls let other Python threads run.

The job's shape is checked against what mpirun tells each process in its environment (Open
MPI's OMPI_COMM_WORLD_* variables), not against herd. Every test runs on every rank, in the same
order; each error case must raise on every rank, and a collective right after proves that
nothing was left half-submitted.
"""

import os
import threading
import time

import numpy as np
import pytest

import herd
import herd.numpy as hnp
from herd import handles, reduce_ops


def _env_int(name, default):
    return int(os.environ.get(name, default))


def test_job_shape_matches_mpirun():
    """On one machine local equals global and there is one 'cross'. Across hosts
    (tests/multihost) of local_size ranks each, filled in rank order as mpirun places
    them by default, cross_rank is the host's index and cross_size the number of hosts."""
    expected_rank = _env_int("OMPI_COMM_WORLD_RANK", 0)
    expected_size = _env_int("OMPI_COMM_WORLD_SIZE", 1)
    local_size = _env_int("OMPI_COMM_WORLD_LOCAL_SIZE", expected_size)
    assert herd.rank() == expected_rank
    assert herd.size() == expected_size
    assert herd.local_rank() == _env_int("OMPI_COMM_WORLD_LOCAL_RANK", expected_rank)
    assert herd.local_size() == local_size
    assert herd.local_rank() == expected_rank % local_size
    assert herd.cross_rank() == expected_rank // local_size
    assert herd.cross_size() == expected_size // local_size
    assert herd.mpi_threads_supported() is True
    assert herd.is_initialized() is True


def test_init_is_idempotent(rank, size):
    herd.init()
    herd.init()
    assert herd.is_initialized()
    assert (herd.rank(), herd.size()) == (rank, size)
    out = hnp.allreduce(np.array([rank + 1], dtype=np.int64), op=herd.Sum, name="basics.init")
    assert out.tolist() == [size * (size + 1) // 2]


def test_init_registers_process_sets_when_already_running(rank, size):
    first = herd.ProcessSet([0])
    herd.init(process_sets=[first, [size - 1, 0]])
    try:
        assert first.process_set_id is not None
        assert first.size() == 1
        assert first.included() == (rank == 0)
    finally:
        assert herd.remove_process_set(first)
    # The list became a set of its own; find it among those added and remove it too.
    second = [s for s in herd.process_sets._added_sets.values() if s.ranks == sorted({0, size - 1})]
    assert len(second) == 1
    assert herd.remove_process_set(second[0])


def test_init_refuses_a_communicator():
    with pytest.raises(ValueError, match="MPI_COMM_WORLD"):
        herd.init(comm=object())


def test_error_types():
    assert issubclass(herd.Error, RuntimeError)
    assert herd.HorovodInternalError is herd.Error


# --------------------------------------------------------------------------
# Process sets
# --------------------------------------------------------------------------

def test_global_process_set(rank, size):
    g = herd.global_process_set
    assert g.process_set_id == 0
    assert g.ranks == list(range(size))
    assert (g.rank(), g.size(), g.included()) == (rank, size, True)
    with pytest.raises(ValueError, match="global process set cannot be removed"):
        herd.remove_process_set(g)
    assert g.process_set_id == 0
    hnp.barrier(process_set=g)


def test_process_set_from_a_list(rank, size):
    members = [size - 1, 0]  # unsorted on purpose: the set keeps its ranks ascending
    ps = herd.add_process_set(members)
    try:
        assert isinstance(ps, herd.ProcessSet)
        assert ps.ranks == sorted(set(members))
        assert ps.process_set_id not in (None, 0)
        assert ps.size() == len(set(members))
        assert ps.included() == (rank in members)
        expected_rank = sorted(set(members)).index(rank) if rank in members else -1
        assert ps.rank() == expected_rank
        if ps.included():
            out = hnp.allreduce(np.array([rank], dtype=np.int32), op=herd.Sum, name="ps.list",
                                process_set=ps)
            assert out.tolist() == [sum(set(members))]
    finally:
        assert herd.remove_process_set(ps) is True
    assert ps.process_set_id is None


def test_process_set_from_an_object(rank, size):
    ps = herd.ProcessSet([0])
    with pytest.raises(ValueError, match="not registered"):
        ps.rank()
    with pytest.raises(ValueError, match="not registered"):
        ps.size()
    with pytest.raises(ValueError, match="not registered"):
        ps.included()
    returned = herd.add_process_set(ps)
    assert returned is ps
    assert (ps.size(), ps.rank(), ps.included()) == (1, 0 if rank == 0 else -1, rank == 0)
    # The same object twice: refused in Python, on every rank alike.
    with pytest.raises(ValueError, match="already registered"):
        herd.add_process_set(ps)
    # Another object with the same ranks: refused by the runtime, on every rank alike.
    twin = herd.ProcessSet([0])
    with pytest.raises(herd.Error, match="already has ranks"):
        herd.add_process_set(twin)
    assert twin.process_set_id is None
    assert herd.remove_process_set(ps) is True
    # Removed: unusable, and removing again reports it was not registered.
    assert herd.remove_process_set(ps) is False
    with pytest.raises(ValueError, match="not registered"):
        ps.size()
    with pytest.raises(ValueError, match="not registered"):
        hnp.allreduce(np.zeros(2), name="ps.removed", process_set=ps)
    with pytest.raises(ValueError, match="not registered"):
        hnp.barrier(process_set=ps)
    # Its ranks can make a new set again.
    again = herd.add_process_set([0])
    assert again.size() == 1
    assert herd.remove_process_set(again)
    hnp.barrier()


def test_unregistered_process_set_is_refused(rank, size):
    never_added = herd.ProcessSet(list(range(size)))
    for call in (lambda: hnp.allreduce(np.ones(3), name="unreg", process_set=never_added),
                 lambda: hnp.allgather(np.ones(3), name="unreg", process_set=never_added),
                 lambda: hnp.broadcast(np.ones(3), 0, name="unreg", process_set=never_added),
                 lambda: hnp.barrier(process_set=never_added)):
        with pytest.raises(ValueError, match="not registered"):
            call()
    with pytest.raises(ValueError, match="not a herd.ProcessSet"):
        hnp.allreduce(np.ones(3), name="unreg", process_set=[0, 1])
    assert hnp.allreduce(np.ones(3), op=herd.Sum, name="unreg.after").tolist() == [size] * 3


def test_bad_process_set_lists_raise_on_every_rank(size):
    with pytest.raises(herd.Error, match="at least one rank"):
        herd.add_process_set([])
    with pytest.raises(herd.Error, match="duplicate"):
        herd.add_process_set([0, 0])
    with pytest.raises(herd.Error, match="outside"):
        herd.add_process_set([0, size])
    hnp.barrier()


# --------------------------------------------------------------------------
# Reduction operators
# --------------------------------------------------------------------------

def test_op_resolution():
    resolve = reduce_ops.resolve_op
    assert resolve(None, None, "t") == herd.Average
    assert resolve(None, True, "t") == herd.Average
    assert resolve(None, False, "t") == herd.Sum
    for op in (herd.Sum, herd.Average, herd.Min, herd.Max, herd.Product, herd.Adasum):
        assert resolve(op, None, "t") == op
    with pytest.raises(ValueError, match="not both"):
        resolve(herd.Sum, True, "t")
    with pytest.raises(ValueError, match="not both"):
        resolve(herd.Sum, False, "t")
    for bad in (0, 1, "Sum", 1.0):
        with pytest.raises(ValueError, match="is not one of"):
            resolve(bad, None, "t")


def test_op_resolution_in_a_collective(rank, size):
    x = np.array([2 * rank + 1], dtype=np.float64)  # sum over ranks: size ** 2
    assert hnp.allreduce(x, average=False, name="op.sum").tolist() == [size ** 2]
    assert hnp.allreduce(x, average=True, name="op.avg").tolist() == [size]
    assert hnp.allreduce(x, name="op.default").tolist() == [size]
    with pytest.raises(ValueError, match="not both"):
        hnp.allreduce(x, average=True, op=herd.Sum, name="op.bad")
    with pytest.raises(ValueError, match="is not one of"):
        hnp.allreduce(x, op=3, name="op.bad")
    assert hnp.allreduce(x, op=herd.Max, name="op.after").tolist() == [2 * size - 1]


# --------------------------------------------------------------------------
# Handles and names
# --------------------------------------------------------------------------

def test_handle_table(rank, size):
    with pytest.raises(ValueError, match="unknown"):
        hnp.synchronize(987654321)
    with pytest.raises(ValueError, match="unknown"):
        hnp.poll(987654321)
    x = np.full(5, rank, dtype=np.int64)
    handle = hnp.allreduce_async(x, op=herd.Sum, name="handles.once")
    assert isinstance(handle, int)
    deadline = time.monotonic() + 30
    while not hnp.poll(handle):
        assert time.monotonic() < deadline, "poll never became True"
        time.sleep(0.001)
    assert hnp.poll(handle) is True
    assert hnp.synchronize(handle).tolist() == [size * (size - 1) // 2] * 5
    with pytest.raises(ValueError, match="already synchronized"):
        hnp.synchronize(handle)
    with pytest.raises(ValueError, match="unknown"):
        hnp.poll(handle)
    # Handles are distinct, and the table holds nothing once all are synchronized.
    a = hnp.allreduce_async(x, op=herd.Sum, name="handles.a")
    b = hnp.allreduce_async(x, op=herd.Sum, name="handles.b")
    assert a != b
    hnp.synchronize(b)
    hnp.synchronize(a)
    assert handles.table._entries == {}


def test_failed_handle_is_removed(rank, size):
    x = np.zeros(rank + 1, dtype=np.float32)  # shapes differ: the operation fails on wait
    handle = hnp.allreduce_async(x, name="handles.fail")
    with pytest.raises(herd.Error, match="shape mismatch"):
        hnp.synchronize(handle)
    with pytest.raises(ValueError, match="unknown"):
        hnp.synchronize(handle)
    assert hnp.allreduce(np.ones(1), op=herd.Sum, name="handles.fail").tolist() == [size]


def test_unnamed_submissions_in_the_same_order(rank, size):
    """Unnamed tensors are numbered per collective in call order; the same order everywhere
    matches them, even when synchronized in another order and interleaved with other
    collectives."""
    arrays = [np.full(3, rank * 10 + i, dtype=np.int64) for i in range(6)]
    reduces = [hnp.allreduce_async(a, op=herd.Sum) for a in arrays]
    gathers = [hnp.allgather_async(np.full(1, rank + 100 * i, dtype=np.int32))
               for i in range(3)]
    total_ranks = size * (size - 1) // 2
    for i in reversed(range(len(reduces))):
        assert hnp.synchronize(reduces[i]).tolist() == [10 * total_ranks + size * i] * 3
    for i in reversed(range(len(gathers))):
        assert hnp.synchronize(gathers[i]).tolist() == [r + 100 * i for r in range(size)]
    before = handles.names._counters["allreduce"]
    hnp.allreduce(np.zeros(1))
    assert handles.names._counters["allreduce"] == before + 1
    # A name given explicitly is used as is and consumes no number.
    assert handles.names.name("allreduce", "given") == "given"
    assert handles.names._counters["allreduce"] == before + 1


# --------------------------------------------------------------------------
# The GIL is released while waiting
# --------------------------------------------------------------------------

LATE_RANK = 1
LATE_SECONDS = 0.5


def _blocking_calls(added_sets=None):
    """Blocking calls that wait for LATE_RANK; each runs on every rank. add_process_set puts
    the set it made into added_sets, for the caller to remove after the measurement."""
    def synchronize_allreduce():
        hnp.allreduce(np.ones(4), name="gil.allreduce")

    def synchronize_async():
        hnp.synchronize(hnp.allgather_async(np.ones(4), name="gil.allgather"))

    def barrier():
        hnp.barrier()

    def join():
        assert hnp.join() == LATE_RANK

    def add_process_set():
        added_sets.append(herd.add_process_set([0]))

    return {"allreduce": synchronize_allreduce, "synchronize": synchronize_async,
            "barrier": barrier, "join": join, "add_process_set": add_process_set}


# Edges of the wait left out of the measurement: the thread gets the interpreter for a switch
# interval (5 ms) around the call even when the call holds the GIL.
EDGE_SECONDS = 0.05


def _run_beside_a_python_thread(body):
    """Runs body() while another Python thread loops, noting the time whenever a millisecond
    has passed since its last note.

    Returns (seconds body took, notes the thread made inside the wait, EDGE_SECONDS away from
    its ends). A call that holds the GIL while it waits leaves the thread no note there; one
    that releases it, about one per millisecond of the thread's CPU time, which on this loaded
    machine can be well under the wall time, but not near zero.
    """
    stamps = []
    stop = threading.Event()

    def tick():
        last = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if now - last > 0.001:
                stamps.append(now)
                last = now

    thread = threading.Thread(target=tick)
    thread.start()
    try:
        time.sleep(0.01)  # let the thread start
        started = time.monotonic()
        body()
        ended = time.monotonic()
    finally:
        stop.set()
        thread.join()
    inside = [t for t in stamps if started + EDGE_SECONDS < t < ended - EDGE_SECONDS]
    return ended - started, len(inside)


def _wait_for_late_rank(body, rank):
    """Runs body() on every rank, LATE_RANK entering LATE_SECONDS late, and rank 0 measuring
    with _run_beside_a_python_thread. Returns rank 0's measurement on every rank, so that
    every rank passes or fails alike."""
    hnp.barrier()
    measured = np.zeros(2)
    if rank == 0:
        measured[:] = _run_beside_a_python_thread(body)
    else:
        if rank == LATE_RANK:
            time.sleep(LATE_SECONDS)
        body()
    return hnp.broadcast(measured, 0, name="gil.measured")


def _check_released(what, measured):
    waited, notes = measured
    assert waited > LATE_SECONDS / 2, f"{what} returned after {waited:.3f} s without waiting"
    assert notes >= 20, (
        f"{what}: another Python thread ran in only {int(notes)} milliseconds of the "
        f"{waited:.3f} s wait: the call holds the GIL while it waits")


@pytest.mark.parametrize("call", sorted(_blocking_calls()))
def test_waiting_releases_the_gil(call, rank):
    """Rank 0 waits in a blocking call that LATE_RANK enters half a second late while another
    Python thread runs."""
    added_sets = []
    measured = _wait_for_late_rank(_blocking_calls(added_sets)[call], rank)
    for process_set in added_sets:
        herd.remove_process_set(process_set)
    _check_released(call, measured)


def test_remove_process_set_releases_the_gil(rank):
    """remove_process_set waits for every rank of the job too."""
    ps = herd.add_process_set([0])
    _check_released("remove_process_set",
                    _wait_for_late_rank(lambda: herd.remove_process_set(ps), rank))
