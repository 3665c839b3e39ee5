"""The allreduce family on torch tensors, as handles: allreduce and grouped allreduce, out of
place (``*_async``) and in place (``*_async_``, and the blocking ``allreduce_`` and
``grouped_allreduce_``), and the sparse allreduce, which allgathers the ranks' nonzeros.
The differentiable blocking ``allreduce`` and ``grouped_allreduce`` are in autograd_ops."""

import torch

from herd import _native
from herd.handles import synchronize, table
from herd.process_sets import global_process_set
from herd.reduce_ops import Average, Sum, resolve_op
from herd.torch.collective_ops import _allgather_submit
from herd.torch.submission import _copy_back, _held, _set_or_global, _submit_group, _target
from herd.torch.tensor_bridge import (
    _contiguous,
    _contiguous_list,
    _from_result,
    _new_result,
    _placement,
    _wire_dtype,
)

def _allreduce_submit(tensor, output, dtype, name, op, prescale_factor, postscale_factor,
                      process_set, caller):
    """Submits ``tensor`` (contiguous, of wire dtype ``dtype``) reduced into ``output``;
    returns the native handle."""
    tensor_name, process_set_id = _target("allreduce", name, process_set, caller)
    return _native.allreduce_async(
        tensor_name, tensor.data_ptr(), output.data_ptr(), dtype, list(tensor.shape), op,
        float(prescale_factor), float(postscale_factor), process_set_id, *_placement(tensor))


def allreduce_async(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                    postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` across the ranks of ``process_set`` into a new tensor; returns a
    handle whose ``synchronize`` gives it. ``op`` defaults to Average (``average=`` is the
    deprecated spelling). The result is ``postscale * op(prescale * tensor)``."""
    caller = "herd.torch.allreduce"
    dtype = _wire_dtype(tensor, caller, reduces=True)
    op = resolve_op(op, average, caller)
    data = _contiguous(tensor)
    output = _new_result(data)
    native = _allreduce_submit(data, output, dtype, name, op, prescale_factor, postscale_factor,
                               process_set, caller)
    return table.add(native, (data, output), lambda _: output,
                     _held("allreduce", name, process_set))


def allreduce_async_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
                     postscale_factor=1.0, process_set=global_process_set):
    """As ``allreduce_async``, but the result overwrites ``tensor``."""
    caller = "herd.torch.allreduce_"
    dtype = _wire_dtype(tensor, caller, reduces=True)
    op = resolve_op(op, average, caller)
    data = _contiguous(tensor)
    native = _allreduce_submit(data, data, dtype, name, op, prescale_factor, postscale_factor,
                               process_set, caller)
    return table.add(native, (tensor, data), lambda _: _copy_back(tensor, data),
                     _held("allreduce", name, process_set))


def allreduce_(tensor, average=None, name=None, op=None, prescale_factor=1.0,
               postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` in place and returns it. Not differentiable."""
    return synchronize(allreduce_async_(tensor, average, name, op, prescale_factor,
                                        postscale_factor, process_set))


def _grouped_allreduce_submit(tensors, outputs, name, op, prescale_factor, postscale_factor,
                              process_set, caller):
    if not tensors:
        raise ValueError(f"{caller}: give at least one tensor")
    dtypes = [_wire_dtype(t, caller, reduces=True) for t in tensors]
    base, process_set_id = _target("grouped_allreduce", name, process_set, caller)
    placements = [_placement(t) for t in tensors]
    return _native.grouped_allreduce_async(
        [f"{base}.{i}" for i in range(len(tensors))], [t.data_ptr() for t in tensors],
        [o.data_ptr() for o in outputs], dtypes, [list(t.shape) for t in tensors], op,
        float(prescale_factor), float(postscale_factor), process_set_id,
        [device for device, _ in placements], [stream for _, stream in placements])


def grouped_allreduce_async(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                            postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one unit (none starts before all are ready everywhere);
    the handle gives a list of new tensors."""
    caller = "herd.torch.grouped_allreduce"
    tensors, data = _contiguous_list(tensors, caller, reduces=True)
    op = resolve_op(op, average, caller)
    outputs = [_new_result(d) for d in data]
    native = _grouped_allreduce_submit(data, outputs, name, op, prescale_factor,
                                       postscale_factor, process_set, caller)
    return table.add(native, (data, outputs), lambda _: outputs,
                     _held("grouped_allreduce", name, process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """As ``grouped_allreduce_async``, but each result overwrites its tensor."""
    caller = "herd.torch.grouped_allreduce_"
    tensors, data = _contiguous_list(tensors, caller, reduces=True)
    op = resolve_op(op, average, caller)
    native = _grouped_allreduce_submit(data, data, name, op, prescale_factor, postscale_factor,
                                       process_set, caller)
    return table.add(native, (tensors, data),
                     lambda _: [_copy_back(t, d) for t, d in zip(tensors, data)],
                     _held("grouped_allreduce", name, process_set))


def grouped_allreduce_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                       postscale_factor=1.0, process_set=global_process_set):
    """Reduces each tensor of the list in place; returns the list. Not differentiable."""
    return synchronize(grouped_allreduce_async_(tensors, average, name, op, prescale_factor,
                                                postscale_factor, process_set))


class CallableHandle(int):
    """The handle of ``sparse_allreduce_async``: an integer handle, as every other, that is
    also callable, since Horovod's sparse_allreduce_async returns a function to call for the
    result. ``handle()`` is ``synchronize(handle)``."""

    __slots__ = ()

    def __call__(self):
        return synchronize(self)


def sparse_allreduce_async(tensor, name, op, process_set=global_process_set):
    """Reduces a sparse COO ``tensor`` across ``process_set`` as Horovod does: the ranks'
    nonzeros are allgathered, indices under ``<name>.indices`` and values under
    ``<name>.values``. Returns a handle (``synchronize(handle)`` or ``handle()``) that gives
    a sparse tensor of ``tensor``'s shape holding every rank's entries, concatenated in rank
    order and left uncoalesced (an index that several ranks hold appears once per rank;
    ``coalesce()`` adds them up). Each rank's tensor is coalesced before it travels.
    ``op`` is Sum or Average (the values divided by the set's size); Average takes
    floating-point values only. ``name=None`` numbers the two gathers as unnamed ones."""
    caller = "herd.torch.sparse_allreduce_async"
    if not isinstance(tensor, torch.Tensor) or tensor.layout != torch.sparse_coo:
        got = tensor.layout if isinstance(tensor, torch.Tensor) else type(tensor).__name__
        raise ValueError(f"{caller}: expected a sparse COO tensor, got {got}; reduce a dense "
                         "tensor with allreduce_async")
    op = resolve_op(op, None, caller)
    if op != Sum and op != Average:
        raise ValueError(f"{caller}: a sparse tensor is reduced with Sum or Average, not {op!r}")
    if op == Average and not (tensor.is_floating_point() or tensor.is_complex()):
        raise ValueError(f"{caller}: op=Average divides the values, which are {tensor.dtype}; "
                         "use op=Sum for integer values")
    coalesced = tensor.detach().coalesce()
    # allgather concatenates along dimension 0, so indices travel one row per nonzero.
    indices = coalesced.indices().t().contiguous()
    values = coalesced.values().contiguous()
    _wire_dtype(indices, caller, reduces=False)
    _wire_dtype(values, caller, reduces=False)
    members = _set_or_global(process_set).size()
    parts = [(indices, None if name is None else f"{name}.indices"),
             (values, None if name is None else f"{name}.values")]
    group = _submit_group(
        [lambda data=data, part=part: _allgather_submit(
            data, *_target("allgather", part, process_set, caller), caller)
         for data, part in parts],
        (indices, values))

    def finish(done):
        gathered_indices, gathered_values = (
            _from_result(native.result(), data.dtype)
            for native, (data, _) in zip(done.natives, parts))
        if op == Average:
            gathered_values = gathered_values / members
        return torch.sparse_coo_tensor(gathered_indices.t(), gathered_values, tensor.shape)

    held = [key for _, part in parts for key in _held("allgather", part, process_set)]
    return CallableHandle(table.add(group, (indices, values), finish, held))
