"""torch tensors to and from herd's native layer: the dtype check, the device and stream a
tensor crosses with, and the tensors over the memory a result is written to.

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


def _contiguous_list(tensors, caller, reduces, at_least_one=False):
    """A grouped call's tensors as a list and their contiguous data: every tensor's dtype and
    device checked first, so a bad one fails before any copy is made."""
    tensors = list(tensors)
    if at_least_one and not tensors:
        raise ValueError(f"{caller}: give at least one tensor")
    for t in tensors:
        _wire_dtype(t, caller, reduces)
    return tensors, [_contiguous(t) for t in tensors]


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
