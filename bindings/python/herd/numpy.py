"""herd's collectives on NumPy arrays.

Same names and arguments as ``herd.torch`` (Horovod's), on C-contiguous
``numpy.ndarray``s of uint8, int8, int16, int32, int64, float16, float32 or
float64 (NumPy has no bfloat16). Out-of-place calls return new arrays;
``allreduce_`` and ``broadcast_`` write into the array given. Each ``*_async``
returns a handle for ``synchronize``/``poll``.
"""

import numpy as np

from herd import _native
from herd.handles import poll, synchronize, table, target
from herd.process_sets import global_process_set, process_set_id_of
from herd.reduce_ops import resolve_op

__all__ = [
    "allgather",
    "allgather_async",
    "allreduce",
    "allreduce_",
    "allreduce_async",
    "allreduce_async_",
    "alltoall",
    "alltoall_async",
    "barrier",
    "broadcast",
    "broadcast_",
    "broadcast_async",
    "broadcast_async_",
    "grouped_allreduce",
    "grouped_allreduce_",
    "grouped_allreduce_async",
    "grouped_allreduce_async_",
    "join",
    "poll",
    "reducescatter",
    "reducescatter_async",
    "synchronize",
]


def _checked(array, caller):
    if not isinstance(array, np.ndarray):
        raise ValueError(f"{caller}: expected a numpy.ndarray, got {type(array).__name__}")
    if not array.flags.c_contiguous:
        raise ValueError(f"{caller}: the array must be C-contiguous (use numpy.ascontiguousarray)")
    if not array.dtype.isnative:
        # herd reads the bytes as this machine's order; dtype.name does not tell the orders apart.
        raise ValueError(f"{caller}: the array's byte order is not the machine's "
                         "(use array.astype(array.dtype.newbyteorder('=')))")
    return array


def _writable(array, caller):
    """An array herd writes into: checked, and not read-only (herd would write regardless)."""
    _checked(array, caller)
    if not array.flags.writeable:
        raise ValueError(f"{caller}: the array is read-only")
    return array


def _from_result(result):
    dtype = np.dtype(result.dtype)
    return np.frombuffer(result, dtype=np.uint8).view(dtype).reshape(result.shape)


def allreduce_async_(array, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``array`` in place across ranks; returns a handle."""
    caller = "herd.numpy.allreduce"
    _writable(array, caller)
    op = resolve_op(op, average, caller)
    tensor_name, process_set_id = target("allreduce", name, process_set, caller)
    native = _native.allreduce_async(
        tensor_name, array.ctypes.data, array.ctypes.data, array.dtype.name, list(array.shape),
        op, float(prescale_factor), float(postscale_factor), process_set_id)
    return table.add(native, array, lambda _: array, [(process_set_id, tensor_name)])


def allreduce_async(array, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Reduces a copy of ``array`` across ranks; returns a handle."""
    _checked(array, "herd.numpy.allreduce")
    return allreduce_async_(array.copy(), average, name, op, prescale_factor, postscale_factor,
                            process_set)


def allreduce(array, average=None, name=None, op=None, prescale_factor=1.0,
              postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async(array, average, name, op, prescale_factor,
                                       postscale_factor, process_set))


def allreduce_(array, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    return synchronize(allreduce_async_(array, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def grouped_allreduce_async_(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``arrays`` in place as one unit; the handle gives the list of them."""
    caller = "herd.numpy.grouped_allreduce"
    outputs = [_writable(a, caller) for a in arrays]
    op = resolve_op(op, average, caller)
    base, process_set_id = target("grouped_allreduce", name, process_set, caller)
    native = _native.grouped_allreduce_async(
        [f"{base}.{i}" for i in range(len(outputs))], [a.ctypes.data for a in outputs],
        [a.ctypes.data for a in outputs], [a.dtype.name for a in outputs],
        [list(a.shape) for a in outputs], op, float(prescale_factor), float(postscale_factor),
        process_set_id)
    return table.add(native, outputs, lambda _: outputs, [(process_set_id, base)])


def grouped_allreduce_async(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Reduces copies of ``arrays`` as one unit; the handle gives a list of new arrays."""
    copies = [_checked(a, "herd.numpy.grouped_allreduce").copy() for a in arrays]
    return grouped_allreduce_async_(copies, average, name, op, prescale_factor, postscale_factor,
                                    process_set)


def grouped_allreduce_(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async_(arrays, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


def grouped_allreduce(arrays, average=None, name=None, op=None, prescale_factor=1.0,
                      postscale_factor=1.0, process_set=global_process_set):
    return synchronize(grouped_allreduce_async(arrays, average, name, op, prescale_factor,
                                               postscale_factor, process_set))


def allgather_async(array, name=None, process_set=global_process_set):
    """Concatenates every rank's ``array`` along axis 0, in rank order."""
    caller = "herd.numpy.allgather"
    _checked(array, caller)
    tensor_name, process_set_id = target("allgather", name, process_set, caller)
    native = _native.allgather_async(tensor_name, array.ctypes.data, array.dtype.name,
                                     list(array.shape), process_set_id)
    return table.add(native, array, lambda done: _from_result(done.result()),
                     [(process_set_id, tensor_name)])


def allgather(array, name=None, process_set=global_process_set):
    return synchronize(allgather_async(array, name, process_set))


def broadcast_async_(array, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``array`` with ``root_rank``'s, in place."""
    caller = "herd.numpy.broadcast"
    _writable(array, caller)
    tensor_name, process_set_id = target("broadcast", name, process_set, caller)
    native = _native.broadcast_async(tensor_name, array.ctypes.data, array.dtype.name,
                                     list(array.shape), int(root_rank), process_set_id)
    return table.add(native, array, lambda _: array, [(process_set_id, tensor_name)])


def broadcast_async(array, root_rank, name=None, process_set=global_process_set):
    _checked(array, "herd.numpy.broadcast")
    return broadcast_async_(array.copy(), root_rank, name, process_set)


def broadcast(array, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async(array, root_rank, name, process_set))


def broadcast_(array, root_rank, name=None, process_set=global_process_set):
    return synchronize(broadcast_async_(array, root_rank, name, process_set))


def alltoall_async(array, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[i]`` rows of ``array`` to rank i; the handle gives
    ``(received, received_splits)``."""
    caller = "herd.numpy.alltoall"
    _checked(array, caller)
    splits = [] if splits is None else [int(s) for s in np.asarray(splits).reshape(-1)]
    tensor_name, process_set_id = target("alltoall", name, process_set, caller)
    native = _native.alltoall_async(tensor_name, array.ctypes.data, array.dtype.name,
                                    list(array.shape), splits, process_set_id)
    return table.add(native, array, lambda done: (_from_result(done.result()),
                                                  np.asarray(done.received_splits(),
                                                             dtype=np.int32)),
                     [(process_set_id, tensor_name)])


def alltoall(array, splits=None, name=None, process_set=global_process_set):
    """The received rows; with ``splits`` given, ``(received, received_splits)`` (Horovod's
    return)."""
    received, received_splits = synchronize(alltoall_async(array, splits, name, process_set))
    return received if splits is None else (received, received_splits)


def reducescatter_async(array, name=None, op=None, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``array`` across ranks and keeps this rank's block of rows."""
    caller = "herd.numpy.reducescatter"
    _checked(array, caller)
    op = resolve_op(op, None, caller)
    tensor_name, process_set_id = target("reducescatter", name, process_set, caller)
    native = _native.reducescatter_async(tensor_name, array.ctypes.data, array.dtype.name,
                                         list(array.shape), op, float(prescale_factor),
                                         float(postscale_factor), process_set_id)
    return table.add(native, array, lambda done: _from_result(done.result()),
                     [(process_set_id, tensor_name)])


def reducescatter(array, name=None, op=None, process_set=global_process_set,
                  prescale_factor=1.0, postscale_factor=1.0):
    return synchronize(reducescatter_async(array, name, op, process_set, prescale_factor,
                                           postscale_factor))


def barrier(process_set=global_process_set):
    _native.barrier(process_set_id_of(process_set, "herd.numpy.barrier"))


def join():
    """Blocks until every rank has joined; returns the rank that joined last."""
    return _native.join()
