"""How herd._native carries devices, under mpirun at 2 and 3 ranks, in every build.

Tensors cross into the extension as (address, dtype, shape, device, stream); results come back
as herd Tensors, read through the buffer protocol in host memory and through
``__cuda_array_interface__`` on a GPU. What each build can check:

- without CUDA: a view on a GPU is refused by the runtime ("no GPU support"), so is a Tensor;
- with CUDA but no usable GPU (a build machine): a Tensor on a GPU cannot be allocated, and the
  runtime refuses a view on a GPU with an error about the device;
- with a GPU: a Tensor on it gives its ``__cuda_array_interface__`` and refuses the buffer
  protocol. (test_torch_cuda.py runs the collectives themselves on CUDA tensors.)

Every rank runs every test in the same order, and each refused submission is followed by a
collective, which proves nothing was left half-submitted.
"""

import gc
import os
import subprocess
import sys

import numpy as np
import pytest

import herd
import herd.numpy as hnp
from herd import _native

TYPESTRS = {"uint8": "|u1", "int8": "|i1", "int16": "<i2", "int32": "<i4", "int64": "<i8",
            "float16": "<f2", "bfloat16": "<V2", "float32": "<f4", "float64": "<f8"}


def _gpu_tensor_or_error(dtype="float32", shape=(4,), device=0):
    """(Tensor, None) when herd can allocate on that GPU here, else (None, the herd.Error)."""
    try:
        return _native.Tensor(dtype, list(shape), device), None
    except herd.Error as error:
        return None, error


# Whether herd can use GPU 0 on this machine: decided once, the same on every rank.
_PROBE, _PROBE_ERROR = _gpu_tensor_or_error("uint8", (1,))
GPU_USABLE = _PROBE is not None
del _PROBE


def still_works(size, what):
    out = hnp.allreduce(np.array([1], dtype=np.int64), op=herd.Sum, name=f"devices.after.{what}")
    assert out.tolist() == [size], what


def test_built_flags_are_callable_before_init():
    # cuda_built is a bool; nccl_built NCCL's version code or 0, as Horovod's.
    assert isinstance(herd.cuda_built(), bool) and isinstance(herd.nccl_built(), int)
    assert (herd.nccl_built() != 0) is herd._native.nccl_built()
    assert herd.cuda_built() or not herd.nccl_built()
    # A fresh interpreter that never starts herd (nor MPI).
    code = ("import herd; print(herd.is_initialized(), herd.cuda_built(), herd.nccl_built())")
    done = subprocess.run([sys.executable, "-c", code], env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", str(herd.cuda_built()), str(herd.nccl_built())]


def test_device_numbers_are_checked_before_submission(size):
    data = np.ones(4, dtype=np.float32)
    with pytest.raises(ValueError, match="neither -1"):
        _native.allreduce_async("devices.bad", data.ctypes.data, data.ctypes.data, "float32",
                                [4], _native.ReduceOp.SUM, device=-2)
    with pytest.raises(ValueError, match="neither -1"):
        _native.Tensor("float32", [4], -5)
    with pytest.raises(ValueError, match="negative extent"):
        _native.Tensor("float32", [2, -1])
    with pytest.raises(ValueError, match="one of each per tensor"):
        _native.grouped_allreduce_async(["devices.g"], [data.ctypes.data], [data.ctypes.data],
                                        ["float32"], [[4]], _native.ReduceOp.SUM,
                                        devices=[-1, -1])
    with pytest.raises(ValueError, match="one of each per tensor"):
        _native.grouped_allreduce_async(["devices.g"], [data.ctypes.data], [data.ctypes.data],
                                        ["float32"], [[4]], _native.ReduceOp.SUM, streams=[0, 0])
    still_works(size, "bad device numbers")


def test_views_given_as_cpu_explicitly(rank, size):
    data = np.full(3, rank + 1, dtype=np.int64)
    _native.allreduce_async("devices.cpu", data.ctypes.data, data.ctypes.data, "int64", [3],
                            _native.ReduceOp.SUM, 1.0, 1.0, 0, device=-1, stream=0).wait()
    assert data.tolist() == [size * (size + 1) // 2] * 3
    group = [np.full(2, rank, dtype=np.int32), np.full(1, 1, dtype=np.int32)]
    _native.grouped_allreduce_async(
        ["devices.cpu.g.0", "devices.cpu.g.1"], [g.ctypes.data for g in group],
        [g.ctypes.data for g in group], ["int32", "int32"], [[2], [1]], _native.ReduceOp.SUM,
        devices=[-1, -1], streams=[0, 0]).wait()
    assert group[0].tolist() == [size * (size - 1) // 2] * 2 and group[1].tolist() == [size]


def test_cpu_result_tensor_reads_through_the_buffer_protocol():
    tensor = _native.Tensor("float32", [2, 3])
    assert (tensor.dtype, tensor.shape, tensor.nbytes, tensor.device) == ("float32", [2, 3], 24,
                                                                          -1)
    assert not hasattr(tensor, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="host memory"):
        tensor.__cuda_array_interface__
    view = memoryview(tensor)
    assert (view.nbytes, view.format, view.ndim, view.readonly) == (24, "B", 1, False)
    view.release()
    array = np.frombuffer(tensor, dtype=np.float32)
    array[:] = np.arange(6)
    del tensor  # the array's buffer keeps the Tensor alive
    gc.collect()
    assert array.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    empty = _native.Tensor("int64", [0, 5])
    assert empty.nbytes == 0 and memoryview(empty).nbytes == 0


def test_gpu_tensor_cannot_be_made_without_a_usable_gpu():
    if GPU_USABLE:
        pytest.skip("a GPU is usable here: test_gpu_tensor_interfaces covers it")
    message = str(_PROBE_ERROR)
    assert "gpu:0" in message, message
    if not herd.cuda_built():
        assert "no GPU support" in message, message
    else:
        # The build has CUDA: the failure is the device's (no driver or no GPU), named as such.
        assert "no GPU support" not in message, message


def test_gpu_tensor_interfaces():
    """On a usable GPU: __cuda_array_interface__ for every dtype, buffer protocol refused."""
    if not GPU_USABLE:
        pytest.skip(f"no usable GPU for herd here: {_PROBE_ERROR}")
    for dtype, typestr in TYPESTRS.items():
        tensor = _native.Tensor(dtype, [2, 3], 0)
        assert tensor.device == 0
        interface = tensor.__cuda_array_interface__
        assert set(interface) == {"shape", "typestr", "data", "strides", "stream", "version"}
        assert interface["shape"] == (2, 3) and interface["typestr"] == typestr
        address, read_only = interface["data"]
        assert isinstance(address, int) and address != 0 and read_only is False
        assert interface["strides"] is None and interface["stream"] is None
        assert interface["version"] == 3
        with pytest.raises(BufferError, match=r"gpu:0.*__cuda_array_interface__"):
            memoryview(tensor)
        with pytest.raises(BufferError, match="gpu:0"):
            np.frombuffer(tensor, dtype=np.uint8)
    scalar = _native.Tensor("float64", [], 0)
    assert scalar.__cuda_array_interface__["shape"] == ()


def test_runtime_refuses_a_gpu_view_it_cannot_use(size):
    """A view on GPU 0 where herd cannot use one: herd.Error from the runtime, at submission or
    from wait, naming the device; never a crash or a hang. (Host memory stands in for the
    device memory: it is refused before anything reads it.)"""
    if GPU_USABLE:
        pytest.skip("a GPU is usable here; test_torch_cuda.py submits real GPU tensors")
    data = np.ones(4, dtype=np.float32)
    for name, submit in [
        ("allreduce", lambda: _native.allreduce_async(
            "devices.gpu.allreduce", data.ctypes.data, data.ctypes.data, "float32", [4],
            _native.ReduceOp.SUM, device=0)),
        ("allgather", lambda: _native.allgather_async(
            "devices.gpu.allgather", data.ctypes.data, "float32", [4], device=0)),
        ("broadcast", lambda: _native.broadcast_async(
            "devices.gpu.broadcast", data.ctypes.data, "float32", [4], 0, device=0)),
    ]:
        with pytest.raises(herd.Error) as raised:
            submit().wait()
        message = str(raised.value)
        assert "gpu:0" in message, (name, message)
        if herd.cuda_built():
            # The device's failure, not the build's ("rank r can use no CUDA device: ...").
            assert "no GPU support" not in message and "device" in message, (name, message)
        else:
            assert "no GPU support" in message, (name, message)
        still_works(size, f"gpu view {name}")
