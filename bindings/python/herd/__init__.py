"""herd: data-parallel collectives for training processes launched by mpirun.

The top level holds what every front end shares: start and stop, the job's
shape, reduction operators and process sets. The collectives live in the front
ends: ``herd.numpy`` for NumPy arrays and ``herd.torch`` for torch tensors (a
drop-in for ``horovod.torch``); ``herd.kvstore`` is MXNet's KVStore on either,
and ``herd.recordio`` MXNet's RecordIO files (``mxnet.recordio``). docs/python.md
describes them.
"""

from herd._native import Error, InvalidArgumentError, UnsupportedError
from herd.basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
    fail,
    gloo_built,
    gloo_enabled,
    init,
    is_homogeneous,
    is_initialized,
    local_rank,
    local_size,
    mpi_built,
    mpi_enabled,
    mpi_threads_supported,
    nccl_built,
    rank,
    rocm_built,
    shutdown,
    size,
    start_timeline,
    stats,
    stop_timeline,
)
from herd.process_sets import (
    ProcessSet,
    add_process_set,
    global_process_set,
    remove_process_set,
)
from herd.reduce_ops import Adasum, Average, Max, Min, Product, Sum

__version__ = "0.1.0"

# Horovod's name for the error of a failed collective, for scripts that catch it.
# A call wrong on this rank alone raises InvalidArgumentError (also a ValueError,
# as Horovod raises), a request herd does not support UnsupportedError (also a
# NotImplementedError); both are herd.Error too.
HorovodInternalError = Error

__all__ = [
    "Adasum",
    "Average",
    "Error",
    "HorovodInternalError",
    "InvalidArgumentError",
    "UnsupportedError",
    "Max",
    "Min",
    "Product",
    "ProcessSet",
    "Sum",
    "add_process_set",
    "ccl_built",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "ddl_built",
    "fail",
    "global_process_set",
    "gloo_built",
    "gloo_enabled",
    "init",
    "is_homogeneous",
    "is_initialized",
    "local_rank",
    "local_size",
    "mpi_built",
    "mpi_enabled",
    "mpi_threads_supported",
    "nccl_built",
    "rank",
    "rocm_built",
    "remove_process_set",
    "shutdown",
    "size",
    "start_timeline",
    "stats",
    "stop_timeline",
]
