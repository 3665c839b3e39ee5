"""Shapes whose size overflows int64, through herd._native under mpirun at 2 and 3 ranks.

The Python package hands herd an address, a dtype and a shape; a shape whose element count or
byte size exceeds 2^63-1 must be refused with herd.Error naming the tensor and the shape, on the
submitting rank, before anything is queued (so the next collective still works), never wrapped
around into a small count. herd.Tensor refuses such shapes the same way.
"""

import numpy as np
import pytest

import herd
import herd.numpy as hnp
from herd import _native

HUGE = 2**62 + 1  # [HUGE, 4] has 2^64 + 4 elements, which wrap to 4


def still_works(size, what):
    out = hnp.allreduce(np.array([1], dtype=np.int64), op=herd.Sum, name=f"shapes.after.{what}")
    assert out.tolist() == [size], what


def test_allreduce_refuses_an_element_count_past_int64(size):
    data = np.ones(16, dtype=np.float32)
    expected = ("allreduce 'shapes.x': input shape [4611686018427387905,4] has more elements "
                "than 2^63-1 (the product of its extents overflows int64)")
    with pytest.raises(herd.Error) as raised:
        _native.allreduce_async("shapes.x", data.ctypes.data, data.ctypes.data, "float32",
                                [HUGE, 4], _native.ReduceOp.SUM)
    assert str(raised.value) == expected
    still_works(size, "elements")


def test_allreduce_refuses_a_byte_size_past_int64(size):
    data = np.ones(16, dtype=np.float64)
    expected = ("allreduce 'shapes.y': input shape [1152921504606846976,2] of float64 "
                "(2305843009213693952 elements of 8 bytes) is larger than 2^63-1 bytes")
    with pytest.raises(herd.Error) as raised:
        _native.allreduce_async("shapes.y", data.ctypes.data, data.ctypes.data, "float64",
                                [2**60, 2], _native.ReduceOp.SUM)
    assert str(raised.value) == expected
    still_works(size, "bytes")


def test_tensor_refuses_an_element_count_past_int64(size):
    with pytest.raises(herd.Error) as raised:
        _native.Tensor("uint8", [2**32, 2**32 + 1])
    assert str(raised.value) == ("herd::Tensor: shape [4294967296,4294967297] has more elements "
                                 "than 2^63-1 (the product of its extents overflows int64)")
    still_works(size, "tensor")
