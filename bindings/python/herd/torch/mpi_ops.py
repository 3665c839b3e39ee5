"""herd's collectives on torch tensors, with horovod.torch 0.28's names and arguments.

Every collective comes as a blocking call (``allreduce``) and an ``*_async``
one that returns an integer handle for ``poll`` and ``synchronize``; a trailing
underscore (``allreduce_``) writes the result into the tensor given. The
out-of-place blocking calls are autograd functions whose backward passes are
Horovod's (each class below states its rule); the in-place ones are not
differentiable, as in Horovod.

Tensors cross to the C++ runtime by address, without copies: out-of-place
allreduce and broadcast write into a tensor allocated here, allgather, alltoall
and reducescatter return the buffer herd allocated (``torch.frombuffer`` on the
CPU, ``torch.as_tensor`` over ``__cuda_array_interface__`` on a GPU; no copy). A
non-contiguous input is made contiguous first; an in-place call on a
non-contiguous tensor reduces a contiguous copy and copies the result back.

CUDA tensors are taken when herd was built with CUDA (``cuda_built()``): each
crosses with its device's index and the address of that device's current torch
stream, and herd waits for the work queued on that stream before it reads the
tensor (so a result computed on the current stream right before the call is
what herd sees). A result is complete when ``synchronize`` returns.
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
from herd.torch.compression import Compression

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

# torch dtype -> herd's name for it. torch.bool travels as uint8 where nothing
# is reduced (allgather, broadcast, alltoall): the bytes are the same.
_WIRE_NAMES = {
    torch.uint8: "uint8",
    torch.int8: "int8",
    torch.int16: "int16",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float32: "float32",
    torch.float64: "float64",
}

_NO_GPU = "herd was built without GPU support; move the tensor to the CPU (tensor.cpu())"
_CUDA = _native.cuda_built()


# --------------------------------------------------------------------------
# Tensors to and from the native layer
# --------------------------------------------------------------------------

def _wire_dtype(tensor, caller, reduces):
    """herd's dtype name for ``tensor``, after checking herd can take it."""
    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"{caller}: expected a torch.Tensor, got {type(tensor).__name__}")
    # is_cpu and is_cuda: tensor.device makes a new object on every call.
    if not tensor.is_cpu and not (tensor.is_cuda and _CUDA):
        accepted = "herd takes CPU and CUDA tensors" if _CUDA else _NO_GPU
        raise ValueError(f"{caller}: the tensor is on {tensor.device}; {accepted}")
    if tensor.layout != torch.strided:
        raise ValueError(f"{caller}: {tensor.layout} tensors are not supported; use a dense one")
    if tensor.dtype == torch.bool and not reduces:
        return "uint8"
    name = _WIRE_NAMES.get(tensor.dtype)
    if name is None:
        accepted = ", ".join(str(d) for d in _WIRE_NAMES)
        extra = "" if reduces else " or torch.bool"
        raise ValueError(f"{caller}: {tensor.dtype} tensors are not supported; "
                         f"herd takes {accepted}{extra}")
    return name


_ON_THE_CPU = (-1, 0)


def _placement(tensor):
    """``(device, stream)``, the native call's last two arguments (passed by position, which
    pybind11 takes faster than keywords): -1 and 0 on the CPU; on a GPU its index and the
    address of its current stream (0 for the legacy default stream), on which herd waits for
    the work queued before the call."""
    if not tensor.is_cuda:
        return _ON_THE_CPU
    return (tensor.device.index, torch.cuda.current_stream(tensor.device).cuda_stream)


def _contiguous(tensor):
    """The tensor's data, contiguous: the tensor itself when it already is (the runtime reads
    and writes its memory by address, which autograd never sees either way), else a
    contiguous copy outside autograd."""
    return tensor if tensor.is_contiguous() else tensor.detach().contiguous()


def _needs_gradient(tensor):
    """Whether autograd records an operation on ``tensor`` now. When it does not, the
    autograd Function is skipped: its result would have no grad_fn either, and building the
    node costs a few microseconds per call."""
    return torch.is_grad_enabled() and getattr(tensor, "requires_grad", False)


# CPU results of at least this many bytes take their memory from herd's pool of recycled host
# blocks (_native.HostBuffer) rather than from torch's allocator: see _new_result.
_POOLED_RESULT_BYTES = 64 << 10


def _new_result(data):
    """An uninitialized contiguous tensor of ``data``'s shape, dtype and device, for a
    collective to write into.

    A large CPU result takes a recycled block whose pages are mapped already: a fresh
    allocation of that size comes from mmap, and its first touch page-faults once per page
    (with the kernel zeroing each) inside the collective, where every rank waits for the
    slowest. The tensor holds the block until nothing uses its memory; the block then goes
    back to the pool (at most HOST_BUFFER_MAX_IDLE_BYTES idle per process)."""
    nbytes = data.numel() * data.element_size()
    if nbytes < _POOLED_RESULT_BYTES or not data.is_cpu:
        return torch.empty(data.shape, dtype=data.dtype, device=data.device)
    return torch.frombuffer(_native.HostBuffer(nbytes), dtype=data.dtype).view(data.shape)


class _DeviceBytes:
    """A herd result on a GPU as one dimension of bytes for ``torch.as_tensor``, which reads
    ``__cuda_array_interface__`` with NumPy's element codes (so not bfloat16); the dtype is
    applied after, as for ``torch.frombuffer``. torch holds a reference to this object, and
    this object one to the result, for as long as the tensor's memory is in use."""

    __slots__ = ("result", "__cuda_array_interface__")

    def __init__(self, result):
        self.result = result
        self.__cuda_array_interface__ = dict(result.__cuda_array_interface__,
                                             shape=(result.nbytes,), typestr="|u1")


def _from_result(result, dtype):
    """A tensor over the memory herd allocated for a result (on the input's device), without
    a copy."""
    if result.device < 0:
        if result.nbytes == 0:
            return torch.empty(result.shape, dtype=dtype)
        return torch.frombuffer(result, dtype=torch.uint8).view(dtype).reshape(result.shape)
    device = torch.device("cuda", result.device)
    if result.nbytes == 0:
        return torch.empty(result.shape, dtype=dtype, device=device)
    return torch.as_tensor(_DeviceBytes(result), device=device).view(dtype).reshape(
        result.shape)


def _target(collective, name, process_set, caller):
    """handles.target, with Horovod's '<collective>.<name>' for a given name. (So a name
    submitted as two different collectives on two ranks never meets, as in Horovod; herd.numpy
    keeps names as given, and the runtime reports that mismatch instead.)"""
    return target(collective, None if name is None else f"{collective}.{name}", process_set,
                  caller)


def _held(collective, name, process_set):
    """The (process set id, tensor name) a named submission holds until its handle is
    synchronized (herd.handles); none for an unnamed one, whose name is never reused."""
    if name is None:
        return []
    return [(process_set_id_of(process_set, collective), f"{collective}.{name}")]


def _copy_back(destination, source):
    """Writes ``source`` into ``destination`` unless they are the same memory (``source`` is
    then the contiguous copy made of a non-contiguous ``destination``)."""
    if destination.data_ptr() != source.data_ptr():
        with torch.no_grad():
            destination.copy_(source)
    return destination


def _compress_each(compression, tensors):
    """The compressed tensors and their contexts, as two lists."""
    pairs = [compression.compress(t) for t in tensors]
    return [c for c, _ in pairs], [context for _, context in pairs]


class _NativeGroup:
    """Several native operations behind one handle, for the grouped collectives
    herd's C++ API runs as separate operations (allgather, reducescatter).

    ``wait`` waits for every member, even after one failed, so that no member
    still writes when the handle is gone, then raises the first failure.
    """

    def __init__(self, natives):
        self.natives = natives

    def poll(self):
        return all(native.poll() for native in self.natives)

    def wait(self):
        wait_all(native.wait for native in self.natives)


# Operations of a grouped call whose later member failed to submit: the
# runtime still reads their inputs, so they stay referenced until complete.
_orphans = []


def _submit_group(submits, keep_alive):
    """Runs each ``submit()`` (each returns a native handle) and groups the handles. If one
    raises, those already submitted stay referenced, with ``keep_alive``, until complete."""
    _orphans[:] = [(native, kept) for native, kept in _orphans if not native.poll()]
    natives = []
    try:
        for submit in submits:
            natives.append(submit())
    except BaseException:
        _orphans.extend((native, keep_alive) for native in natives)
        raise
    return _NativeGroup(natives)


def _set_or_global(process_set):
    """The set a gradient needs the size and ranks of: None means the global set."""
    return global_process_set if process_set is None else process_set


# --------------------------------------------------------------------------
# Allreduce
# --------------------------------------------------------------------------

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


class HorovodAllreduce(torch.autograd.Function):
    """Allreduce; the gradient is the allreduce of the incoming gradient with the same
    operator, scale factors and process set (Horovod's rule)."""

    @staticmethod
    def forward(ctx, tensor, average, name, op, prescale_factor, postscale_factor,
                process_set):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return synchronize(allreduce_async(tensor, average, name, op, prescale_factor,
                                           postscale_factor, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, average=ctx.average, op=ctx.op,
                         prescale_factor=ctx.prescale_factor,
                         postscale_factor=ctx.postscale_factor, process_set=ctx.process_set)
        return grad, None, None, None, None, None, None


def allreduce(tensor, average=None, name=None, compression=Compression.none, op=None,
              prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces ``tensor`` across ranks and returns the result in a new tensor (differentiable).
    ``compression`` converts the tensor before it travels and back after."""
    compressed, context = compression.compress(tensor)
    if _needs_gradient(compressed):
        reduced = HorovodAllreduce.apply(compressed, average, name, op, prescale_factor,
                                         postscale_factor, process_set)
    else:
        reduced = synchronize(allreduce_async(compressed, average, name, op, prescale_factor,
                                              postscale_factor, process_set))
    return compression.decompress(reduced, context)


# --------------------------------------------------------------------------
# Grouped allreduce
# --------------------------------------------------------------------------

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
    tensors = list(tensors)
    for t in tensors:
        _wire_dtype(t, caller, reduces=True)
    op = resolve_op(op, average, caller)
    data = [_contiguous(t) for t in tensors]
    outputs = [_new_result(d) for d in data]
    native = _grouped_allreduce_submit(data, outputs, name, op, prescale_factor,
                                       postscale_factor, process_set, caller)
    return table.add(native, (data, outputs), lambda _: outputs,
                     _held("grouped_allreduce", name, process_set))


def grouped_allreduce_async_(tensors, average=None, name=None, op=None, prescale_factor=1.0,
                             postscale_factor=1.0, process_set=global_process_set):
    """As ``grouped_allreduce_async``, but each result overwrites its tensor."""
    caller = "herd.torch.grouped_allreduce_"
    tensors = list(tensors)
    for t in tensors:
        _wire_dtype(t, caller, reduces=True)
    op = resolve_op(op, average, caller)
    data = [_contiguous(t) for t in tensors]
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


class HorovodGroupedAllreduce(torch.autograd.Function):
    """Grouped allreduce; the gradients are a grouped allreduce of the incoming ones with the
    same operator, scale factors and process set."""

    @staticmethod
    def forward(ctx, average, name, op, prescale_factor, postscale_factor, process_set,
                *tensors):
        ctx.average = average
        ctx.op = op
        ctx.prescale_factor = prescale_factor
        ctx.postscale_factor = postscale_factor
        ctx.process_set = process_set
        return tuple(synchronize(grouped_allreduce_async(
            list(tensors), average, name, op, prescale_factor, postscale_factor, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), average=ctx.average, op=ctx.op,
                                  prescale_factor=ctx.prescale_factor,
                                  postscale_factor=ctx.postscale_factor,
                                  process_set=ctx.process_set)
        return (None, None, None, None, None, None, *grads)


def grouped_allreduce(tensors, average=None, name=None, compression=Compression.none, op=None,
                      prescale_factor=1.0, postscale_factor=1.0, process_set=global_process_set):
    """Reduces a list of tensors as one unit; returns a list of new tensors (differentiable)."""
    compressed, contexts = _compress_each(compression, tensors)
    reduced = HorovodGroupedAllreduce.apply(average, name, op, prescale_factor,
                                            postscale_factor, process_set, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, contexts)]


# --------------------------------------------------------------------------
# Allgather
# --------------------------------------------------------------------------

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


def _rows_before_this_rank(first_dims, process_set):
    """Offset of this rank's rows in an allgather's result, from every member's row counts."""
    counts = allgather(torch.tensor(first_dims, dtype=torch.int64).reshape(1, -1),
                       process_set=process_set)
    own = process_set.rank()
    return counts[:own].sum(dim=0).tolist()


class HorovodAllgather(torch.autograd.Function):
    """Allgather; the gradient is the incoming gradient averaged across the process set
    (Horovod's rule, not summed), narrowed to this rank's rows."""

    @staticmethod
    def forward(ctx, tensor, name, process_set):
        ctx.rows = tensor.shape[0] if tensor.dim() > 0 else 0
        ctx.process_set = _set_or_global(process_set)
        return synchronize(allgather_async(tensor, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        offset = _rows_before_this_rank([ctx.rows], ctx.process_set)[0]
        return grad.narrow(0, offset, ctx.rows), None, None


def allgather(tensor, name=None, process_set=global_process_set):
    """Concatenates every rank's ``tensor`` along the first dimension (differentiable)."""
    return HorovodAllgather.apply(tensor, name, process_set)


def grouped_allgather_async(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of the list; the handle gives a list of results."""
    caller = "herd.torch.grouped_allgather"
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{caller}: give at least one tensor")
    for t in tensors:
        _wire_dtype(t, caller, reduces=False)
    data = [_contiguous(t) for t in tensors]
    base, process_set_id = _target("grouped_allgather", name, process_set, caller)
    group = _submit_group(
        [lambda d=d, i=i: _allgather_submit(d, f"{base}.{i}", process_set_id, caller)
         for i, d in enumerate(data)], data)
    return table.add(group, data, lambda done: [
        _from_result(native.result(), d.dtype) for native, d in zip(done.natives, data)],
        [(process_set_id, base)])


class HorovodGroupedAllgather(torch.autograd.Function):
    """Grouped allgather; each gradient is its allgather's rule (averaged, narrowed)."""

    @staticmethod
    def forward(ctx, name, process_set, *tensors):
        ctx.rows = [t.shape[0] if t.dim() > 0 else 0 for t in tensors]
        ctx.process_set = _set_or_global(process_set)
        return tuple(synchronize(grouped_allgather_async(list(tensors), name, process_set)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = grouped_allreduce(list(grad_outputs), op=Average, process_set=ctx.process_set)
        offsets = _rows_before_this_rank(ctx.rows, ctx.process_set)
        return (None, None, *[g.narrow(0, offset, rows)
                              for g, offset, rows in zip(grads, offsets, ctx.rows)])


def grouped_allgather(tensors, name=None, process_set=global_process_set):
    """Allgathers each tensor of the list; returns a list (differentiable)."""
    return list(HorovodGroupedAllgather.apply(name, process_set, *tensors))


# --------------------------------------------------------------------------
# Sparse allreduce
# --------------------------------------------------------------------------

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


# --------------------------------------------------------------------------
# Broadcast
# --------------------------------------------------------------------------

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


class HorovodBroadcast(torch.autograd.Function):
    """Broadcast; the gradient is the incoming gradient averaged across the process set on
    the root and zero elsewhere (Horovod's rule)."""

    @staticmethod
    def forward(ctx, tensor, root_rank, name, process_set):
        ctx.root_rank = root_rank
        ctx.process_set = process_set
        return synchronize(broadcast_async(tensor, root_rank, name, process_set))

    @staticmethod
    def backward(ctx, grad_output):
        grad = allreduce(grad_output, op=Average, process_set=ctx.process_set)
        if rank() != ctx.root_rank:
            grad = torch.zeros_like(grad)
        return grad, None, None, None


def broadcast(tensor, root_rank, name=None, process_set=global_process_set):
    """Returns a new tensor holding ``root_rank``'s ``tensor`` (differentiable)."""
    return HorovodBroadcast.apply(tensor, root_rank, name, process_set)


# --------------------------------------------------------------------------
# Alltoall
# --------------------------------------------------------------------------

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


class HorovodAlltoall(torch.autograd.Function):
    """Alltoall; the gradient is an alltoall of the incoming gradient back to the senders,
    with the received splits as splits."""

    @staticmethod
    def forward(ctx, tensor, splits, name, process_set):
        output, received_splits = synchronize(alltoall_async(tensor, splits, name, process_set))
        ctx.process_set = process_set
        ctx.received_splits = received_splits
        if splits is None:
            return output
        ctx.mark_non_differentiable(received_splits)
        return output, received_splits

    @staticmethod
    def backward(ctx, grad_output, *unused_split_grads):
        grad, _ = synchronize(alltoall_async(grad_output, splits=ctx.received_splits,
                                             process_set=ctx.process_set))
        return grad, None, None, None


def alltoall(tensor, splits=None, name=None, process_set=global_process_set):
    """Alltoall (differentiable). Returns the received tensor, and with ``splits`` given,
    ``(received, received_splits)`` as Horovod does."""
    return HorovodAlltoall.apply(tensor, splits, name, process_set)


# --------------------------------------------------------------------------
# Reducescatter
# --------------------------------------------------------------------------

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


def _reducescatter_grad_scale(op, prescale_factor, postscale_factor, process_set):
    """Horovod 0.28's factor on a reducescatter's gradient: the set's size for Sum (1 for
    Average), times both scale factors."""
    scale = float(process_set.size()) if op == Sum else 1.0
    return scale * prescale_factor * postscale_factor


class HorovodReducescatter(torch.autograd.Function):
    """Reducescatter; the gradient is the allgather of the incoming gradient, multiplied by
    the process set's size for op=Sum and by both scale factors (Horovod 0.28's rule)."""

    @staticmethod
    def forward(ctx, tensor, name, op, process_set, prescale_factor, postscale_factor):
        ctx.process_set = _set_or_global(process_set)
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor,
                                              ctx.process_set)
        return synchronize(reducescatter_async(tensor, name, op, process_set, prescale_factor,
                                               postscale_factor))

    @staticmethod
    def backward(ctx, grad_output):
        if ctx.scale != 1.0:
            grad_output = grad_output * ctx.scale
        return allgather(grad_output, process_set=ctx.process_set), None, None, None, None, None


def reducescatter(tensor, name=None, compression=Compression.none, op=Average,
                  process_set=global_process_set, prescale_factor=1.0, postscale_factor=1.0):
    """Reduces ``tensor`` across ranks and returns this rank's block of rows
    (differentiable)."""
    compressed, context = compression.compress(tensor)
    reduced = HorovodReducescatter.apply(compressed, name, op, process_set, prescale_factor,
                                         postscale_factor)
    return compression.decompress(reduced, context)


def grouped_reducescatter_async(tensors, name=None, op=Average, process_set=global_process_set,
                                prescale_factor=1.0, postscale_factor=1.0):
    """Reducescatters each tensor of the list; the handle gives a list of results."""
    caller = "herd.torch.grouped_reducescatter"
    tensors = list(tensors)
    if not tensors:
        raise ValueError(f"{caller}: give at least one tensor")
    for t in tensors:
        _wire_dtype(t, caller, reduces=True)
    op = resolve_op(op, None, caller)
    data = [_contiguous(t) for t in tensors]
    base, process_set_id = _target("grouped_reducescatter", name, process_set, caller)
    group = _submit_group(
        [lambda d=d, i=i: _reducescatter_submit(d, f"{base}.{i}", process_set_id, op,
                                                prescale_factor, postscale_factor, caller)
         for i, d in enumerate(data)], data)
    return table.add(group, data, lambda done: [
        _from_result(native.result(), d.dtype) for native, d in zip(done.natives, data)],
        [(process_set_id, base)])


class HorovodGroupedReducescatter(torch.autograd.Function):
    """Grouped reducescatter; each gradient is its reducescatter's rule."""

    @staticmethod
    def forward(ctx, name, op, process_set, prescale_factor, postscale_factor, *tensors):
        ctx.process_set = _set_or_global(process_set)
        ctx.scale = _reducescatter_grad_scale(op, prescale_factor, postscale_factor,
                                              ctx.process_set)
        return tuple(synchronize(grouped_reducescatter_async(
            list(tensors), name, op, process_set, prescale_factor, postscale_factor)))

    @staticmethod
    def backward(ctx, *grad_outputs):
        grads = [g * ctx.scale if ctx.scale != 1.0 else g for g in grad_outputs]
        return (None, None, None, None, None,
                *grouped_allgather(grads, process_set=ctx.process_set))


def grouped_reducescatter(tensors, name=None, compression=Compression.none, op=Average,
                          process_set=global_process_set, prescale_factor=1.0,
                          postscale_factor=1.0):
    """Reducescatters each tensor of the list; returns a list (differentiable)."""
    compressed, contexts = _compress_each(compression, tensors)
    reduced = HorovodGroupedReducescatter.apply(name, op, process_set, prescale_factor,
                                                postscale_factor, *compressed)
    return [compression.decompress(t, c) for t, c in zip(reduced, contexts)]


# --------------------------------------------------------------------------
# Handles, join, barrier
# --------------------------------------------------------------------------

def join(device=-1):
    """Declares that this rank has no more data: blocks until every rank has joined, taking
    part meanwhile in the other ranks' allreduces with zeros. Returns the rank that joined
    last. ``device`` is Horovod's (where its zeros live): -1, or in a build with CUDA a GPU's
    index, which herd's join does not need (it takes no tensor) and ignores."""
    if device is not None:
        index = int(device)
        if index < -1:
            raise ValueError(f"herd.torch.join: device={device}: give -1 (the CPU) or a GPU's "
                             "index")
        if index >= 0 and not _CUDA:
            raise ValueError(f"herd.torch.join: device={device}: {_NO_GPU}")
    return _native.join()


def barrier(process_set=global_process_set):
    """Returns once every rank of ``process_set`` has called barrier."""
    _native.barrier(process_set_id_of(process_set, "herd.torch.barrier"))
