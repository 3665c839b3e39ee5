"""herd: data-parallel collectives for training processes launched by mpirun.

The top level holds what every front end shares: start and stop, the job's
shape, reduction operators and process sets. The collectives live in the front
ends: ``herd.numpy`` for NumPy arrays and ``herd.torch`` for torch tensors (a
drop-in for ``horovod.torch``); ``herd.kvstore`` is MXNet's KVStore on either.
docs/python.md describes them.
"""

from herd._native import Error
from herd.basics import (
    cross_rank,
    cross_size,
    cuda_built,
    init,
    is_initialized,
    local_rank,
    local_size,
    mpi_threads_supported,
    nccl_built,
    rank,
    shutdown,
    size,
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
HorovodInternalError = Error

__all__ = [
    "Adasum",
    "Average",
    "Error",
    "HorovodInternalError",
    "Max",
    "Min",
    "Product",
    "ProcessSet",
    "Sum",
    "add_process_set",
    "cross_rank",
    "cross_size",
    "cuda_built",
    "global_process_set",
    "init",
    "is_initialized",
    "local_rank",
    "local_size",
    "mpi_threads_supported",
    "nccl_built",
    "rank",
    "remove_process_set",
    "shutdown",
    "size",
]
