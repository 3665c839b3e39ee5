"""The collectives other than allreduce on torch tensors, as handles: allgather and grouped
allgather, broadcast (out of place and in place, and the blocking in-place ``broadcast_``),
alltoall, reducescatter and grouped reducescatter. The differentiable blocking calls are in
autograd_ops."""

import torch

from herd import _native
from herd.handles import synchronize, table
from herd.process_sets import global_process_set
from herd.reduce_ops import Average, resolve_op
from herd.torch.submission import _copy_back, _held, _submit_group, _target
from herd.torch.tensor_bridge import (
    _contiguous,
    _contiguous_list,
    _from_result,
    _new_result,
    _placement,
    _wire_dtype,
)


def _allgather_submit(data, tensor_name, process_set_id, caller):
    dtype = _wire_dtype(data, caller, reduces=False)
    return _native.allgather_async(tensor_name, data.data_ptr(), dtype, list(data.shape),
                                   process_set_id, *_placement(data))


def allgather_async(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's ``tensor`` along the first dimension, in rank order; ranks
    may differ in that dimension only. Returns a handle."""
    caller = "herd.torch.allgather"
    _wire_dtype(tensor, caller, reduces=False)
    data = _contiguous(tensor)
    native = _allgather_submit(data, *_target("allgather", name, process_set, caller), caller)
    return table.add(native, data, lambda done: _from_result(done.result(), data.dtype),
                     _held("allgather", name, process_set))


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of the list; the handle gives a list of results."""
    caller = "herd.torch.grouped_allgather"
    tensors, data = _contiguous_list(tensors, caller, reduces=False, at_least_one=True)
    base, process_set_id = _target("grouped_allgather", name, process_set, caller)
    group = _submit_group(
        [lambda d=d, i=i: _allgather_submit(d, f"{base}.{i}", process_set_id, caller)
         for i, d in enumerate(data)], data)
    return table.add(group, data, lambda done: [
        _from_result(native.result(), d.dtype) for native, d in zip(done.natives, data)],
        [(process_set_id, base)])


def _broadcast_submit(data, root_rank, name, process_set, caller):
    dtype = _wire_dtype(data, caller, reduces=False)
    root_rank = int(root_rank)
    tensor_name, process_set_id = _target("broadcast", name, process_set, caller)
    return _native.broadcast_async(tensor_name, data.data_ptr(), dtype, list(data.shape),
                                   root_rank, process_set_id, *_placement(data))


def broadcast_async(tensor, root_rank, name=None, process_set=global_process_set):
    """Gives every rank a new tensor holding ``root_rank``'s ``tensor`` (root_rank is a global
    rank, a member of ``process_set``). Returns a handle."""
    caller = "herd.torch.broadcast"
    _wire_dtype(tensor, caller, reduces=False)
    output = _new_result(tensor)
    output.copy_(tensor.detach())
    native = _broadcast_submit(output, root_rank, name, process_set, caller)
    return table.add(native, output, lambda _: output, _held("broadcast", name, process_set))


def broadcast_async_(tensor, root_rank, name=None, process_set=global_process_set):
    """As ``broadcast_async``, but ``root_rank``'s values overwrite ``tensor``."""
    caller = "herd.torch.broadcast_"
    _wire_dtype(tensor, caller, reduces=False)
    data = _contiguous(tensor)
    native = _broadcast_submit(data, root_rank, name, process_set, caller)
    return table.add(native, (tensor, data), lambda _: _copy_back(tensor, data),
                     _held("broadcast", name, process_set))


def broadcast_(tensor, root_rank, name=None, process_set=global_process_set):
    """Overwrites ``tensor`` with ``root_rank``'s and returns it. Not differentiable."""
    return synchronize(broadcast_async_(tensor, root_rank, name, process_set))


def _split_list(splits, caller):
    if splits is None:
        return []
    if isinstance(splits, torch.Tensor):
        if splits.is_floating_point():
            raise ValueError(f"{caller}: splits must be integers, got {splits.dtype}")
        return [int(s) for s in splits.reshape(-1).tolist()]
    return [int(s) for s in splits]


def alltoall_async(tensor, splits=None, name=None, process_set=global_process_set):
    """Sends ``splits[i]`` rows of ``tensor`` to the i-th rank of ``process_set`` (an even
    split when ``splits`` is None) and receives every rank's rows for this one, in rank order.
    The handle gives ``(received, received_splits)``; received_splits is an int32 tensor (the
    dtype of ``splits`` when that is a tensor)."""
    caller = "herd.torch.alltoall"
    wire = _wire_dtype(tensor, caller, reduces=False)
    split_list = _split_list(splits, caller)
    splits_dtype = splits.dtype if isinstance(splits, torch.Tensor) else torch.int32
    data = _contiguous(tensor)
    tensor_name, process_set_id = _target("alltoall", name, process_set, caller)
    native = _native.alltoall_async(tensor_name, data.data_ptr(), wire, list(data.shape),
                                    split_list, process_set_id, *_placement(data))

    def finish(done):
        received = _from_result(done.result(), data.dtype)
        return received, torch.tensor(done.received_splits(), dtype=splits_dtype)

    return table.add(native, data, finish, _held("alltoall", name, process_set))


def _reducescatter_submit(data, tensor_name, process_set_id, op, prescale_factor,
                          postscale_factor, caller):
    dtype = _wire_dtype(data, caller, reduces=True)
    return _native.reducescatter_async(
        tensor_name, data.data_ptr(), dtype, list(data.shape), op, float(prescale_factor),
        float(postscale_factor), process_set_id, *_placement(data))


def reducescatter_async(tensor, name=None, op=Average, process_set=global_process_set,
                        prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` across ranks and keeps this rank's block of rows: with R rows and p
    ranks, R // p rows each, the first R % p ranks one more. Returns a handle."""
    caller = "herd.torch.reducescatter"
    _wire_dtype(tensor, caller, reduces=True)
    op = resolve_op(op, None, caller)
    data = _contiguous(tensor)
    tensor_name, process_set_id = _target("reducescatter", name, process_set, caller)
    native = _reducescatter_submit(data, tensor_name, process_set_id, op, prescale_factor,
                                   postscale_factor, caller)
    return table.add(native, data, lambda done: _from_result(done.result(), data.dtype),
                     _held("reducescatter", name, process_set))


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters each tensor of the list; the handle gives a list of results."""
    caller = "herd.torch.grouped_reducescatter"
    tensors, data = _contiguous_list(tensors, caller, reduces=True, at_least_one=True)
    op = resolve_op(op, None, caller)
    base, process_set_id = _target("grouped_reducescatter", name, process_set, caller)
    group = _submit_group(
        [lambda d=d, i=i: _reducescatter_submit(d, f"{base}.{i}", process_set_id, op,
                                                prescale_factor, postscale_factor, caller)
         for i, d in enumerate(data)], data)
    return table.add(group, data, lambda done: [
        _from_result(native.result(), d.dtype) for native, d in zip(done.natives, data)],
        [(process_set_id, base)])
