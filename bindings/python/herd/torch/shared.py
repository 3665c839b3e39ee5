"""Tensors in herd's shared buffers (registered memory).

A CPU tensor made by ``shared_zeros`` lives in a ``herd.SharedBuffer``: memory
that the other ranks on this machine can map. An allreduce whose tensors lie in
such memory on every rank of a machine reduces straight from the peers' memory
instead of copying through shared slots; views into one arena reduced in place
together (a model's gradients) are reduced as one range where they lie.
"""

import math

import torch

from herd import _native

__all__ = ["shared_zeros"]


def shared_zeros(shape, dtype=torch.float32):
    """A zeroed CPU tensor of ``shape`` and ``dtype`` in a new shared buffer.

    The tensor keeps its buffer alive (and so do views of it); the memory is
    freed with the last of them. Like ``torch.zeros``, but allreduces of it (or
    of views into it) on every rank of a machine read straight from each
    other's memory. A tensor of no elements is an ordinary empty tensor.
    """
    shape = tuple(shape) if isinstance(shape, (tuple, list, torch.Size)) else (shape,)
    count = math.prod(shape)
    if count == 0:
        return torch.zeros(shape, dtype=dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    buffer = _native.SharedBuffer(count * itemsize)
    # torch.frombuffer holds a reference to the buffer for the tensor's life.
    return torch.frombuffer(buffer, dtype=torch.uint8).view(dtype).reshape(shape)
