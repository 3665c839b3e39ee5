"""Gradient compression before the wire, as ``horovod.torch.Compression``.

A compressor turns a tensor into the one that travels and back:
``compress(tensor) -> (compressed, context)`` and
``decompress(compressed, context) -> tensor``.
"""

import torch


class Compressor:
    """The interface: compress before the collective, decompress after it."""

    @staticmethod
    def compress(tensor):
        raise NotImplementedError

    @staticmethod
    def decompress(tensor, ctx):
        raise NotImplementedError


class NoneCompressor(Compressor):
    """Sends the tensor as it is."""

    @staticmethod
    def compress(tensor):
        return tensor, None

    @staticmethod
    def decompress(tensor, ctx):
        return tensor


class FP16Compressor(Compressor):
    """Sends floating-point tensors as float16, halving the bytes; other
    dtypes travel unchanged. The result comes back in the original dtype."""

    @staticmethod
    def compress(tensor):
        original_dtype = tensor.dtype
        if tensor.dtype.is_floating_point and tensor.dtype != torch.float16:
            tensor = tensor.to(torch.float16)
        return tensor, original_dtype

    @staticmethod
    def decompress(tensor, ctx):
        original_dtype = ctx
        if original_dtype is not None and tensor.dtype != original_dtype:
            tensor = tensor.to(original_dtype)
        return tensor


class Compression:
    """The compressors by Horovod's names."""

    none = NoneCompressor
    fp16 = FP16Compressor
