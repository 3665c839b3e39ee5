"""herd's collectives on torch tensors, with horovod.torch 0.28's names and arguments.

Every collective comes as a blocking call (``allreduce``) and an ``*_async``
one that returns an integer handle for ``poll`` and ``synchronize``; a trailing
underscore (``allreduce_``) writes the result into the tensor given. The
out-of-place blocking calls are autograd functions whose backward passes are
Horovod's; the in-place ones are not differentiable, as in Horovod.

This module is the namespace horovod.torch's users and herd.torch import from;
the calls live in:

- tensor_bridge: torch tensors to and from the native layer (dtypes, devices and
  streams, results over herd's memory without copies);
- submission: tensor names, held names, copy-back, grouped native handles;
- allreduce_ops: allreduce, grouped allreduce and sparse allreduce, as handles;
- collective_ops: allgather, broadcast, alltoall and reducescatter, as handles;
- autograd_ops: the differentiable blocking calls and their gradient rules;
- coordination: join and barrier.
"""

import torch

from herd import _native
from herd.basics import (
    ccl_built,
    cross_rank,
    cross_size,
    cuda_built,
    ddl_built,
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
from herd.handles import poll, synchronize, table, target, wait_all
from herd.process_sets import (
    ProcessSet,
    add_process_set,
    global_process_set,
    process_set_id_of,
    remove_process_set,
)
from herd.reduce_ops import Adasum, Average, Max, Min, Product, Sum, resolve_op
# The calls, and the private helpers that herd.torch's other modules and its tests reach
# through this module.
from herd.torch.allreduce_ops import (  # noqa: F401
    CallableHandle,
    _allreduce_submit,
    _grouped_allreduce_submit,
    allreduce_,
    allreduce_async,
    allreduce_async_,
    grouped_allreduce_,
    grouped_allreduce_async,
    grouped_allreduce_async_,
    sparse_allreduce_async,
)
from herd.torch.autograd_ops import (  # noqa: F401
    HorovodAllgather,
    HorovodAllreduce,
    HorovodAlltoall,
    HorovodBroadcast,
    HorovodGroupedAllgather,
    HorovodGroupedAllreduce,
    HorovodGroupedReducescatter,
    HorovodReducescatter,
    _reducescatter_grad_scale,
    _rows_before_this_rank,
    allgather,
    allreduce,
    alltoall,
    broadcast,
    grouped_allgather,
    grouped_allreduce,
    grouped_reducescatter,
    reducescatter,
)
from herd.torch.collective_ops import (  # noqa: F401
    _allgather_submit,
    _broadcast_submit,
    _reducescatter_submit,
    _split_list,
    allgather_async,
    alltoall_async,
    broadcast_,
    broadcast_async,
    broadcast_async_,
    grouped_allgather_async,
    grouped_reducescatter_async,
    reducescatter_async,
)
from herd.torch.compression import Compression
from herd.torch.coordination import barrier, join  # noqa: F401
from herd.torch.submission import (  # noqa: F401
    _compress_each,
    _copy_back,
    _held,
    _NativeGroup,
    _orphans,
    _set_or_global,
    _submit_group,
    _target,
)
from herd.torch.tensor_bridge import (  # noqa: F401
    _CUDA,
    _NO_GPU,
    _ON_THE_CPU,
    _POOLED_RESULT_BYTES,
    _WIRE_NAMES,
    _contiguous,
    _DeviceBytes,
    _from_result,
    _needs_gradient,
    _new_result,
    _placement,
    _wire_dtype,
)

Error = _native.Error
InvalidArgumentError = _native.InvalidArgumentError
UnsupportedError = _native.UnsupportedError
# Horovod's name for the error of a failed collective, for scripts that catch it.
HorovodInternalError = Error

__all__ = [
    # Start, stop and the shape of the job (herd.basics).
    "init", "shutdown", "is_initialized", "rank", "size", "local_rank", "local_size",
    "cross_rank", "cross_size", "is_homogeneous", "mpi_threads_supported", "mpi_enabled",
    "mpi_built", "gloo_enabled", "gloo_built", "nccl_built", "ddl_built", "ccl_built",
    "cuda_built", "rocm_built", "start_timeline", "stop_timeline",
    "stats",
    # Operators, process sets, errors.
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "ProcessSet", "add_process_set", "remove_process_set", "global_process_set",
    "HorovodInternalError", "Error", "InvalidArgumentError", "UnsupportedError",
    # Collectives.
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "allgather", "allgather_async", "grouped_allgather", "grouped_allgather_async",
    "sparse_allreduce_async",
    "broadcast", "broadcast_", "broadcast_async", "broadcast_async_",
    "alltoall", "alltoall_async",
    "reducescatter", "reducescatter_async", "grouped_reducescatter",
    "grouped_reducescatter_async",
    "synchronize", "poll", "join", "barrier",
]
