"""herd.torch on CUDA tensors: one GPU per rank (local rank modulo the GPUs visible).

Run by ctest at 1 rank (GPU collectives over NCCL) and at 2 ranks with HERD_GPU_ALLREDUCE=MPI
(through host memory: two ranks may share one GPU there, which NCCL refuses). Skipped as a
whole, with the reason printed after "herd GPU tests skipped: " (ctest's
SKIP_REGULAR_EXPRESSION), unless herd was built with CUDA and torch sees a GPU.

Inputs are rank-unique formulas made on the CPU and moved to the GPU; every expected value is
computed on the CPU from the formula for every rank, never by herd. What is checked: each
collective's values, dtype and device (results stay on the input's GPU), that a result
computed on a side stream right before the call is what herd reads (herd waits on the
tensor's current stream), that results herd allocated keep their memory alive, gradients,
fp16 compression on the device, the model helpers and DistributedOptimizer against the same
training on the CPU.
"""

import gc
import weakref

import pytest
import torch

import herd
import herd.torch as hvd
from herd import _native
from herd.torch import mpi_ops
from rank_checks import check_tensor, expect, rank_values

SKIPPED = "herd GPU tests skipped: "
if not herd.cuda_built():
    pytest.skip(SKIPPED + "this build of herd has no GPU path (herd.cuda_built() is False)",
                allow_module_level=True)
if not torch.cuda.is_available():
    pytest.skip(SKIPPED + f"torch {torch.__version__} sees no CUDA device "
                "(torch.cuda.is_available() is False: CPU-only torch, or no GPU or driver)",
                allow_module_level=True)

DTYPES = [torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32,
          torch.float64]
SHAPES = [(), (0,), (1,), (7,), (5, 3)]
LARGE = ((1 << 21) + 3,)  # 8 MB of float32: more than one block of HERD_GPU_STAGING_BYTES


@pytest.fixture(scope="module")
def device():
    """This rank's GPU, made current (so torch's current stream is on it)."""
    index = hvd.local_rank() % torch.cuda.device_count()
    torch.cuda.set_device(index)
    return torch.device("cuda", index)


def on(device, rank, shape, dtype, salt=0):
    return rank_values(rank, shape, dtype, salt).to(device)


def check(actual, expected, device, what, close=False):
    """``actual`` on ``device`` with ``expected``'s (a CPU tensor's) dtype, shape and values
    (within one rounding for floats when ``close``)."""
    if actual.device != device:
        expect(False, f"{what}: on {actual.device}, expected {device}")
        return
    check_tensor(actual.cpu(), expected, what, close)


def total(shape, dtype, size, salt=0):
    """Sum over every rank's input, computed in int64 on the CPU."""
    return torch.stack([rank_values(r, shape, torch.int64, salt)
                        for r in range(size)]).sum(dim=0).to(dtype)


# --------------------------------------------------------------------------
# The native layer's GPU results
# --------------------------------------------------------------------------

def test_build_flags():
    assert hvd.cuda_built() is True
    assert hvd.nccl_built() is herd.nccl_built()


def test_result_on_gpu_is_wrapped_without_copy_and_kept_alive(device):
    """torch.as_tensor over __cuda_array_interface__ shares the memory and holds the herd
    Tensor until the torch tensor's memory is released; the buffer protocol is refused."""
    result = _native.Tensor("float32", [3, 2], device.index)
    address = result.__cuda_array_interface__["data"][0]
    with pytest.raises(BufferError, match="__cuda_array_interface__"):
        memoryview(result)
    tracker = weakref.ref(result)
    wrapped = torch.as_tensor(result, device=device)
    assert wrapped.data_ptr() == address and wrapped.shape == (3, 2)
    assert wrapped.dtype == torch.float32 and wrapped.device == device
    wrapped.fill_(2.5)
    del result
    gc.collect()
    assert tracker() is not None, "torch's tensor must keep the herd Tensor alive"
    assert wrapped.sum().item() == 15.0
    del wrapped
    gc.collect()
    torch.cuda.synchronize(device)
    assert tracker() is None, "the herd Tensor must go with the last torch tensor over it"

    # herd.torch's own path reads every dtype, bfloat16 included, as bytes first.
    for dtype in DTYPES:
        name = str(dtype).replace("torch.", "")
        result = _native.Tensor(name, [4], device.index)
        tracker = weakref.ref(result)
        address = result.__cuda_array_interface__["data"][0]
        tensor = mpi_ops._from_result(result, dtype)
        assert (tensor.dtype, tensor.shape, tensor.device) == (dtype, (4,), device), dtype
        assert tensor.data_ptr() == address, dtype
        del result
        gc.collect()
        assert tracker() is not None, dtype
        del tensor
        gc.collect()
        assert tracker() is None, dtype
    empty = mpi_ops._from_result(_native.Tensor("float64", [0, 3], device.index), torch.float64)
    assert empty.shape == (0, 3) and empty.device == device


# --------------------------------------------------------------------------
# The collectives
# --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_allreduce(dtype, device, rank, size):
    for shape in SHAPES + ([LARGE] if dtype == torch.float32 else []):
        expected = total(shape, dtype, size)
        tensor = on(device, rank, shape, dtype)
        check(hvd.allreduce(tensor, op=hvd.Sum, name=f"cuda.sum.{dtype}.{shape}"), expected,
              device, f"allreduce {shape}")
        check(tensor, rank_values(rank, shape, dtype), device, "input left alone")
        assert hvd.allreduce_(tensor, op=hvd.Sum) is tensor
        check(tensor, expected, device, f"allreduce_ {shape}")
        handle = hvd.allreduce_async(on(device, rank, shape, dtype), op=hvd.Sum)
        check(hvd.synchronize(handle), expected, device, f"allreduce_async {shape}")
        if dtype.is_floating_point:
            average = (total(shape, torch.float64, size) / size).to(dtype)
            check(hvd.allreduce(on(device, rank, shape, dtype)), average, device,
                  f"average {shape}", close=True)
            scaled = (total(shape, torch.float64, size) * 0.5 * 3.0).to(dtype)
            check(hvd.allreduce(on(device, rank, shape, dtype), op=hvd.Sum,
                                prescale_factor=0.5, postscale_factor=3.0),
                  scaled, device, f"scaled {shape}", close=True)


def test_allreduce_min_max_and_non_contiguous(device, rank, size):
    stacked = torch.stack([rank_values(r, (4, 6), torch.float32) for r in range(size)])
    check(hvd.allreduce(on(device, rank, (4, 6), torch.float32), op=hvd.Min),
          stacked.min(dim=0).values, device, "min")
    check(hvd.allreduce(on(device, rank, (4, 6), torch.float32), op=hvd.Max),
          stacked.max(dim=0).values, device, "max")
    transposed = on(device, rank, (4, 6), torch.float32).t()
    assert not transposed.is_contiguous()
    hvd.allreduce_(transposed, op=hvd.Sum)
    check(transposed, total((4, 6), torch.float32, size).t(), device, "non-contiguous in place")


def test_grouped_allreduce(device, rank, size):
    shapes = [(3,), (2, 5), (0,), (1000,)]
    expected = [total(s, torch.float32, size, salt=i) for i, s in enumerate(shapes)]
    tensors = [on(device, rank, s, torch.float32, salt=i) for i, s in enumerate(shapes)]
    for i, result in enumerate(hvd.grouped_allreduce(tensors, op=hvd.Sum, name="cuda.group")):
        check(result, expected[i], device, f"grouped_allreduce {i}")
    assert hvd.grouped_allreduce_(tensors, op=hvd.Sum) == tensors
    for i, tensor in enumerate(tensors):
        check(tensor, expected[i], device, f"grouped_allreduce_ {i}")


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int64, torch.bfloat16, torch.float32,
                                   torch.bool])
def test_allgather(dtype, device, rank, size):
    """Rank r contributes r + 1 rows: the ranks differ in dimension 0."""
    def rows(r):
        values = rank_values(r, (r + 1, 3), torch.int64)
        return (values % 2 == 0) if dtype == torch.bool else values.to(dtype)

    expected = torch.cat([rows(r) for r in range(size)])
    check(hvd.allgather(rows(rank).to(device), name=f"cuda.gather.{dtype}"), expected, device,
          "allgather")
    results = hvd.grouped_allgather([rows(rank).to(device), rows(rank).to(device)[:, :1]])
    check(results[0], expected, device, "grouped_allgather 0")
    check(results[1], expected[:, :1], device, "grouped_allgather 1")


def test_allgather_large_result_outlives_the_handle(device, rank, size):
    result = hvd.allgather(on(device, rank, LARGE, torch.float32))
    gc.collect()
    # New allocations on the device must not land in the result's memory.
    scratch = [torch.full(LARGE, -1.0, device=device) for _ in range(4)]
    expected = torch.cat([rank_values(r, LARGE, torch.float32) for r in range(size)])
    check(result, expected, device, "allgather after other allocations")
    del scratch


def test_broadcast(device, rank, size):
    root = size - 1
    for shape in SHAPES + [LARGE]:
        expected = rank_values(root, shape, torch.float64)
        check(hvd.broadcast(on(device, rank, shape, torch.float64), root, name=f"cuda.bc.{shape}"),
              expected, device, f"broadcast {shape}")
        tensor = on(device, rank, shape, torch.float64)
        assert hvd.broadcast_(tensor, root) is tensor
        check(tensor, expected, device, f"broadcast_ {shape}")
    transposed = on(device, rank, (3, 4), torch.int32).t()
    hvd.broadcast_(transposed, root)
    check(transposed, rank_values(root, (3, 4), torch.int32).t(), device, "non-contiguous")


def test_alltoall(device, rank, size):
    # Even split: 2 rows per destination.
    rows = on(device, rank, (2 * size, 3), torch.float32)
    expected = torch.cat([rank_values(r, (2 * size, 3), torch.float32)[2 * rank:2 * rank + 2]
                          for r in range(size)])
    check(hvd.alltoall(rows, name="cuda.a2a.even"), expected, device, "alltoall even")
    # Rank r sends d + 1 rows to rank d.
    splits = [d + 1 for d in range(size)]
    count = sum(splits)
    sent = on(device, rank, (count, 2), torch.int64)
    received, received_splits = hvd.alltoall(sent, splits=splits)
    start = sum(splits[:rank])
    expected = torch.cat([rank_values(r, (count, 2), torch.int64)[start:start + rank + 1]
                          for r in range(size)])
    check(received, expected, device, "alltoall splits")
    assert received_splits.tolist() == [rank + 1] * size
    assert received_splits.dtype == torch.int32 and received_splits.device.type == "cpu"


def test_reducescatter(device, rank, size):
    for rows in (size, 2 * size + 1, 1000 * size + 3):
        shape = (rows, 3)
        start = rank * (rows // size) + min(rank, rows % size)
        count = rows // size + (1 if rank < rows % size else 0)
        expected = total(shape, torch.float32, size)[start:start + count]
        check(hvd.reducescatter(on(device, rank, shape, torch.float32), op=hvd.Sum,
                                name=f"cuda.rs.{rows}"), expected, device, f"reducescatter {rows}")
        results = hvd.grouped_reducescatter([on(device, rank, shape, torch.float32)], op=hvd.Sum)
        check(results[0], expected, device, f"grouped_reducescatter {rows}")


def test_gradients_stay_on_the_device(device, rank, size):
    tensor = on(device, rank, (4,), torch.float64).requires_grad_()
    hvd.allreduce(tensor, op=hvd.Sum).sum().backward()
    check(tensor.grad, torch.full((4,), float(size), dtype=torch.float64), device,
          "allreduce gradient")
    tensor = on(device, rank, (rank + 1, 2), torch.float64).requires_grad_()
    (hvd.allgather(tensor) * 2).sum().backward()
    check(tensor.grad, torch.full((rank + 1, 2), 2.0, dtype=torch.float64), device,
          "allgather gradient")


# --------------------------------------------------------------------------
# Streams: herd waits for the work queued on the tensor's current stream
# --------------------------------------------------------------------------

def test_result_of_a_side_stream_is_seen(device, rank, size):
    """Inputs are computed on a side stream behind a kernel that keeps it busy for tens of
    milliseconds, and submitted at once on that stream: herd must wait for the values, not
    read the memory as it was before."""
    source = on(device, rank, LARGE, torch.float32)
    torch.cuda.synchronize(device)
    side = torch.cuda.Stream(device)
    expected = total(LARGE, torch.float32, size) * 2
    for attempt in range(3):
        with torch.cuda.stream(side):
            torch.cuda._sleep(50_000_000)
            tensor = source * 2  # allocated and computed on the side stream, after the sleep
            reduced = hvd.allreduce_async(tensor, op=hvd.Sum, name=f"cuda.stream.{attempt}")
            gathered = hvd.allgather_async(tensor[:5], name=f"cuda.stream.gather.{attempt}")
            in_place = source * 2
            hvd.synchronize(hvd.allreduce_async_(in_place, op=hvd.Sum,
                                                 name=f"cuda.stream.inplace.{attempt}"))
            reduced, gathered = hvd.synchronize(reduced), hvd.synchronize(gathered)
        check(reduced, expected, device, f"allreduce after the side stream, try {attempt}")
        check(in_place, expected, device, f"allreduce_ after the side stream, try {attempt}")
        check(gathered, torch.cat([rank_values(r, (5,), torch.float32) * 2
                                   for r in range(size)]), device, f"allgather, try {attempt}")


def test_results_are_complete_for_other_streams(device, rank, size):
    """herd.synchronize returns once the result is in memory: another stream may read it."""
    result = hvd.allreduce(on(device, rank, LARGE, torch.float32), op=hvd.Sum)
    other = torch.cuda.Stream(device)
    with torch.cuda.stream(other):
        copy = result.clone()
    other.synchronize()
    check(copy, total(LARGE, torch.float32, size), device, "read on another stream")


# --------------------------------------------------------------------------
# Compression, model helpers, DistributedOptimizer
# --------------------------------------------------------------------------

def test_fp16_compression_on_the_device(device, rank, size):
    tensor = on(device, rank, (5, 3), torch.float32)
    compressed, context = hvd.Compression.fp16.compress(tensor)
    assert compressed.dtype == torch.float16 and compressed.device == device
    assert context == torch.float32
    check(hvd.allreduce(tensor, op=hvd.Sum, compression=hvd.Compression.fp16),
          total((5, 3), torch.float32, size), device, "fp16 allreduce")
    check(hvd.reducescatter(on(device, rank, (2 * size, 3), torch.float64), op=hvd.Sum,
                            compression=hvd.Compression.fp16),
          total((2 * size, 3), torch.float64, size)[2 * rank:2 * rank + 2], device,
          "fp16 reducescatter")


class Net(torch.nn.Module):
    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)
        self.double()

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


def batch(step, size):
    generator = torch.Generator().manual_seed(100 + step)
    return (torch.randn(size, 5, 4, generator=generator, dtype=torch.float64),
            torch.randn(size, 5, 3, generator=generator, dtype=torch.float64))


def test_broadcast_parameters_and_optimizer_state(device, rank, size):
    model = Net(seed=rank).to(device)  # different weights on every rank
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    x, y = batch(0, size)
    torch.nn.functional.mse_loss(model(x[rank].to(device)), y[rank].to(device)).backward()
    optimizer.step()  # rank-specific Adam moments on the GPU
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    root_model = Net(seed=0).to(device)
    root_optimizer = torch.optim.Adam(root_model.parameters(), lr=0.01)
    torch.nn.functional.mse_loss(root_model(x[0].to(device)), y[0].to(device)).backward()
    root_optimizer.step()
    # The root computed exactly this; the same kernels here may round differently.
    close = dict(rtol=1e-12, atol=1e-15)
    for (name, mine), theirs in zip(model.state_dict().items(), root_model.state_dict().values()):
        expect(mine.device == device, f"parameter {name} moved to {mine.device}")
        expect(torch.allclose(mine.cpu(), theirs.cpu(), **close), f"parameter {name}")
    for p, q in zip(model.parameters(), root_model.parameters()):
        for key, value in root_optimizer.state[q].items():
            if torch.is_tensor(value):
                got = optimizer.state[p][key]
                expect(got.device == value.device, f"state {key} moved to {got.device}")
                expect(torch.allclose(got.cpu().double(), value.cpu().double(), **close),
                       f"state {key} differs from the root's")


@pytest.mark.parametrize("compression", [hvd.Compression.none, hvd.Compression.fp16])
def test_distributed_optimizer_matches_cpu_training(compression, device, rank, size):
    """Every rank trains on its shard on the GPU; the reference trains the same model on the
    whole batch on the CPU, in this process, without herd."""
    model = Net(seed=7).to(device)
    optimizer = hvd.DistributedOptimizer(
        torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9),
        named_parameters=model.named_parameters(), compression=compression)
    reference = Net(seed=7)
    reference_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    for step in range(3):
        x, y = batch(step, size)
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x[rank].to(device)), y[rank].to(device)).backward()
        optimizer.step()
        reference_optimizer.zero_grad()
        # Mean over ranks of each shard's mean loss = the mean loss of the whole batch.
        torch.nn.functional.mse_loss(reference(x.reshape(-1, 4)), y.reshape(-1, 3)).backward()
        reference_optimizer.step()
    tolerance = dict(rtol=1e-9, atol=1e-11) if compression is hvd.Compression.none else \
        dict(rtol=5e-3, atol=5e-4)
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        expect(p.device == device and p.grad.device == device, f"{name} left the GPU")
        expect(torch.allclose(p.detach().cpu(), q.detach(), **tolerance),
               f"{name}: max difference {(p.detach().cpu() - q.detach()).abs().max().item()}")
    # Every rank ends with the same parameters, bit for bit.
    for name, p in model.named_parameters():
        gathered = hvd.allgather(p.detach().reshape(1, -1))
        expect(all(torch.equal(gathered[0], row) for row in gathered),
               f"{name} differs between ranks")


def test_a_second_gpu_is_refused(device, rank, size):
    """One GPU per rank: a tensor on another GPU than this rank's is refused, on every rank,
    and the next collective works."""
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU visible: no second device to refuse")
    other = torch.device("cuda", (device.index + 1) % torch.cuda.device_count())
    with pytest.raises(herd.Error, match="gpu"):
        hvd.allreduce(torch.ones(2, device=other), name="cuda.second.gpu")
    check(hvd.allreduce(torch.ones(3, device=device), op=hvd.Sum, name="cuda.after.second"),
          torch.full((3,), float(size)), device, "after the refusal")


def test_mixed_cpu_and_gpu_tensors(device, rank, size):
    cpu = hvd.allreduce_async(rank_values(rank, (6,), torch.float32), op=hvd.Sum, name="mix.c")
    gpu = hvd.allreduce_async(on(device, rank, (6,), torch.float32), op=hvd.Sum, name="mix.g")
    expected = total((6,), torch.float32, size)
    result = hvd.synchronize(cpu)
    expect(result.device.type == "cpu" and torch.equal(result, expected), "CPU tensor")
    check(hvd.synchronize(gpu), expected, device, "GPU tensor")


def test_sparse_allreduce_on_the_device(device, rank, size):
    """A CUDA sparse tensor: the ranks' coalesced entries, concatenated in rank order, on the
    input's GPU (Average divides the values by the size)."""

    def entries(r):
        indices = torch.tensor([[r % 4, (r + 2) % 4], [0, 1]])
        return torch.sparse_coo_tensor(indices, torch.tensor([r + 1.0, 2.0 * r + 1.0]), (4, 2))

    result = hvd.sparse_allreduce_async(entries(rank).to(device), "gpu.sparse", hvd.Average)()
    expect(result.is_sparse and result.device == device, f"result {result.layout} on "
                                                         f"{result.device}")
    parts = [entries(r).coalesce() for r in range(size)]
    check(result._indices(), torch.cat([p.indices() for p in parts], dim=1), device,
          "sparse indices")
    check(result._values(), torch.cat([p.values() for p in parts]) / size, device,
          "sparse values")


def test_sync_batch_norm_on_the_device(device, rank, size):
    """SyncBatchNorm on CUDA float64 tensors against BatchNorm2d on the CPU over the
    concatenated batch: output, running statistics, input gradient, summed weight gradient."""
    generator = torch.Generator().manual_seed(31)
    batches = [torch.randn(r + 1, 3, 2, 2, generator=generator, dtype=torch.float64)
               for r in range(size)]
    g = torch.randn(sum(b.shape[0] for b in batches), 3, 2, 2, generator=generator,
                    dtype=torch.float64)
    start = sum(b.shape[0] for b in batches[:rank])
    rows = slice(start, start + batches[rank].shape[0])
    sync = hvd.SyncBatchNorm(3).double().to(device)
    plain = torch.nn.BatchNorm2d(3).double()
    x = batches[rank].to(device, copy=True).requires_grad_()
    everything = torch.cat(batches).requires_grad_()
    out = sync(x)
    expected = plain(everything)
    (out * g[rows].to(device)).sum().backward()
    (expected * g).sum().backward()
    tolerance = dict(rtol=1e-10, atol=1e-12)
    for what, actual, want in [("output", out, expected[rows]),
                               ("running_mean", sync.running_mean, plain.running_mean),
                               ("running_var", sync.running_var, plain.running_var),
                               ("input gradient", x.grad, everything.grad[rows])]:
        expect(actual.device == device, f"{what} on {actual.device}")
        expect(torch.allclose(actual.detach().cpu(), want.detach(), **tolerance),
               f"SyncBatchNorm {what}")
    weight_grad = hvd.allreduce(sync.weight.grad, op=hvd.Sum, name="gpu.sbn.weight")
    expect(torch.allclose(weight_grad.cpu(), plain.weight.grad, **tolerance),
           "SyncBatchNorm summed weight gradient")
