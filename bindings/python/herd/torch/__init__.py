"""herd.torch: herd's collectives on torch tensors, a drop-in for horovod.torch.

``import herd.torch as hvd`` in place of ``import horovod.torch as hvd``: the
same functions, arguments, handles, autograd rules and DistributedOptimizer
(docs/python.md lists them and the differences).
"""

from herd.torch import elastic
from herd.torch.compression import Compression
from herd.torch.functions import (
    allgather_object,
    broadcast_object,
    broadcast_optimizer_state,
    broadcast_parameters,
)
from herd.torch.mpi_ops import *  # noqa: F401,F403 -- the horovod.torch namespace
from herd.torch.mpi_ops import __all__ as _mpi_ops_all
from herd.torch.optimizer import DistributedOptimizer
from herd.torch.shared import shared_zeros
from herd.torch.sync_batch_norm import SyncBatchNorm

__all__ = list(_mpi_ops_all) + [
    "Compression",
    "DistributedOptimizer",
    "SyncBatchNorm",
    "elastic",
    "allgather_object",
    "broadcast_object",
    "broadcast_optimizer_state",
    "broadcast_parameters",
    "shared_zeros",
]
