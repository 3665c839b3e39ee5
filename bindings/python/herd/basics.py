"""Start, stop and the shape of the job.

``init`` starts herd's C++ runtime once per process (MPI included, unless the
program initialized MPI itself); an exit handler shuts it down if the script
does not, because every rank must shut down before MPI lets the job end.
"""

import atexit
import os

from herd import _native


def init(comm=None, process_sets=None):
    """Starts herd. Idempotent, as Horovod's ``init``.

    ``comm``: only ``None`` (MPI_COMM_WORLD) is supported; herd's C++ runtime
    always spans the whole job. ``process_sets``: ``ProcessSet`` objects (or
    lists of ranks) to register right away, in the same order on every rank;
    or Horovod's ``"dynamic"``, which herd accepts and needs not: process sets
    can always be added and removed after init.
    """
    if isinstance(process_sets, str):
        if process_sets != "dynamic":
            raise ValueError(f"herd.init(process_sets={process_sets!r}): give a list of "
                             "process sets or \"dynamic\"")
        process_sets = None
    if comm is not None:
        raise ValueError(
            "herd.init(comm=...): herd always runs on MPI_COMM_WORLD; make subgroups with "
            "process_sets=[...] or herd.add_process_set instead"
        )
    if not _native.is_initialized():
        _native.init()
    if process_sets:
        from herd.process_sets import add_process_set

        for process_set in process_sets:
            add_process_set(process_set)


def shutdown():
    """Stops herd; a no-op when it is not running. Pending operations fail."""
    if _native.is_initialized():
        from herd import handles, process_sets

        _native.shutdown()
        handles.table.clear()
        process_sets._forget_added_sets()


def fail(reason):
    """Ends the job on every rank: every other rank's pending and later
    operations raise ``herd.Error`` holding "rank R (host H, pid P): reason",
    and herd stops on this rank (MPI is left unfinalized, as after any fatal
    failure). The script should then exit with a non-zero status. Raises
    ``herd.Error`` before ``init``, after ``shutdown`` and for an empty reason.
    """
    from herd import handles, process_sets

    _native.fail(str(reason))
    handles.table.clear()
    process_sets._forget_added_sets()


def is_initialized():
    return _native.is_initialized()


def rank():
    """This process's rank in the job, 0 .. size() - 1."""
    return _native.rank()


def size():
    """Number of processes in the job."""
    return _native.size()


def local_rank():
    """This process's rank among those on the same machine."""
    return _native.local_rank()


def local_size():
    """Number of processes on this machine."""
    return _native.local_size()


def cross_rank():
    """Index of this machine among those running a process of this local rank."""
    return _native.cross_rank()


def cross_size():
    """Number of machines running a process of this local rank."""
    return _native.cross_size()


def is_homogeneous():
    """Whether every machine of the job runs the same number of ranks."""
    return _native.is_homogeneous()


def mpi_threads_supported():
    """True: herd runs MPI with MPI_THREAD_MULTIPLE."""
    return _native.mpi_threads_supported()


# Horovod's probes of how it was built and which controller runs, answered for
# herd. All are callable before ``init``.

def mpi_enabled():
    """True: herd's only controller is MPI."""
    return True


def mpi_built():
    """True: herd is always built with MPI."""
    return True


def gloo_enabled():
    """False: herd has no Gloo controller."""
    return False


def gloo_built():
    """False: herd has no Gloo."""
    return False


def ccl_built():
    """False: herd does not use Intel's oneCCL."""
    return False


def ddl_built():
    """False: herd does not use IBM's DDL."""
    return False


def nccl_built():
    """NCCL's version code (22809 for NCCL 2.28.9) when this build of herd uses NCCL for
    GPU tensors, else 0, as Horovod's."""
    return _native.nccl_version_code()


def cuda_built():
    """Whether this build of herd has the GPU path (CUDA): ``herd.torch`` then takes CUDA
    tensors. Callable before ``init``."""
    return _native.cuda_built()


def rocm_built():
    return False


def start_timeline(file_path, mark_cycles=False):
    """Starts writing a timeline to ``file_path``: a Chrome-trace JSON file of each tensor's
    negotiation and operation on this rank, which chrome://tracing and Perfetto open
    (docs/timeline.md). ``mark_cycles`` adds a CYCLE_START mark per background-loop cycle.

    ``%r`` in the path stands for the rank, so that every rank writes its own file; without
    it only rank 0 writes, as Horovod's. A timeline being written to another path is
    finished first. Not collective: call it on any rank, at any time after ``init``.
    """
    _native.start_timeline(os.fspath(file_path), bool(mark_cycles))


def stop_timeline():
    """Finishes the timeline file (valid JSON from then on); a no-op when none is written."""
    _native.stop_timeline()


def stats():
    """This rank's counters since ``init``: a list of dicts, one per process set and
    collective that ran, ordered by process set id then collective, with the keys
    ``collective`` ("allreduce", "allgather", "broadcast", "alltoall", "reducescatter",
    "barrier", "grouped allreduce"), ``process_set`` (the id), ``count`` (operations
    completed), ``failed`` (operations that failed), ``bytes`` (this rank's input bytes of
    the completed ones), ``runs`` (runs of the algorithm: fused operations share one),
    ``total_seconds`` (submission to completion, summed over operations) and
    ``run_seconds`` (the runs' own time). Readable after ``shutdown`` (the last job's);
    ``HERD_STATS=1`` prints them on every rank at shutdown (docs/operations.md).
    """
    return _native.stats()


def _shutdown_at_exit():
    # The interpreter ends while herd still runs: the program did not call
    # shutdown, and the other ranks are told so, naming this rank.
    if _native.is_initialized():
        from herd import handles, process_sets

        _native.shutdown_at_exit()
        handles.table.clear()
        process_sets._forget_added_sets()


atexit.register(_shutdown_at_exit)
