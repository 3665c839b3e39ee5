// gpu_bench.h for a herd-bench built with CUDA: the allreduce sweep on GPU
// buffers.
//
// The paths, in the order of their rows, all on the same two cudaMalloc'ed
// buffers (input, output) of one stream:
//   herd:       herd::allreduce on TensorViews of the GPU (Device::gpu, the
//               stream), through the whole runtime and whichever GPU route
//               herd takes (NCCL, or MPI through host memory with
//               HERD_GPU_ALLREDUCE=MPI), input -> output.
//   nccl:       raw ncclAllReduce on the benchmark's own communicator
//               (gpu_baselines.h), where NCCL is built and no two ranks
//               share a GPU.
//   mpi-staged: the input to pinned host memory, MPI_Allreduce, back.
//   d2d:        rank 0 alone copies as many bytes device to device: the
//               ceiling of one pass over the buffer in GPU memory.
// Every call of a path returns only with its result in the output (herd's
// allreduce waits; the baselines synchronize the stream), so a path's time is
// the wall clock over -n such calls, the slowest rank's, as for the CPU rows.
// The check copies the whole output back to the host after the last call and
// compares every element with the closed form (bench_values.h).
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <herd/herd.h>
#include <herd/tensor.h>

#include "benchmarks/herd_bench/bench_sweep.h"
#include "benchmarks/herd_bench/bench_values.h"
#include "benchmarks/herd_bench/bus_factor.h"
#include "benchmarks/herd_bench/gpu_baselines.h"
#include "benchmarks/herd_bench/gpu_bench.h"
#include "benchmarks/herd_bench/gpu_cuda.h"

namespace herd::bench {
namespace {

// The baselines that run at this dtype and op, and the notes for those that
// do not or were declined.
struct Baselines {
  std::vector<std::unique_ptr<GpuAllreduceBaseline>> rows;
  std::vector<std::string> notes;
};

Baselines make_baselines(const AllreduceBenchOptions& options, MPI_Comm comm,
                         const GpuPlacement& placement, cudaStream_t stream) {
  Baselines baselines;
  std::string declined;
  std::unique_ptr<GpuAllreduceBaseline> nccl =
      make_nccl_baseline(comm, placement, stream, &declined);
  if (!nccl) baselines.notes.push_back("nccl: skipped, " + declined);
  std::unique_ptr<GpuAllreduceBaseline> candidates[] = {std::move(nccl),
                                                        make_mpi_staged_baseline(comm, stream)};
  for (auto& candidate : candidates) {
    if (!candidate) continue;
    const std::string why = candidate->unsupported(options.dtype, options.op);
    if (why.empty()) {
      baselines.notes.push_back(candidate->note());
      baselines.rows.push_back(std::move(candidate));
    } else {
      baselines.notes.push_back(std::string(candidate->path()) + ": skipped, " + why);
    }
  }
  return baselines;
}

}  // namespace

GpuProbe probe_gpu() {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error == cudaSuccess && devices > 0) return GpuProbe{};
  const std::string why = error != cudaSuccess ? std::string(cudaGetErrorName(error)) + " (" +
                                                     cudaGetErrorString(error) + ")"
                                               : "0 devices";
  return GpuProbe{kExitNoDevice, "no CUDA device visible (cudaGetDeviceCount: " + why + ")"};
}

int64_t run_gpu_allreduce_bench(const AllreduceBenchOptions& options, MPI_Comm comm) {
  const Sweep sweep = open_sweep(options, comm);
  const int ranks = sweep.ranks;
  const GpuPlacement placement = select_gpu(comm, herd::local_rank());
  const Device device = Device::gpu(placement.device);
  // Declared before the baselines, which queue their work on it.
  const CudaStream stream;
  const Baselines baselines = make_baselines(options, comm, placement, stream.get());
  const std::size_t element_bytes = element_size(options.dtype);

  print_title(sweep, "allreduce", to_string(options.op) + ", on GPUs", "algbw * 2(p-1)/p");
  if (sweep.rank == 0) {
    const Table& table = sweep.table;
    table.print_note("device: cuda: GPU " + std::to_string(placement.device) + " (" +
                     placement.name + ") of " + std::to_string(placement.devices) +
                     " on rank 0 (local rank % GPUs); cudaMalloc'ed buffers, one stream");
    table.print_note(
        "herd: herd::allreduce on the GPU buffers, by herd's own GPU route (NCCL; "
        "MPI through host memory with HERD_GPU_ALLREDUCE=MPI)");
    for (const std::string& note : baselines.notes) table.print_note(note);
    table.print_note(
        "d2d: rank 0 alone cudaMemcpy's the same bytes device to device, timed with "
        "CUDA events (no reduction, no check)");
    table.print_note(
        "every call returns with its result in the output; the check copies it "
        "back to the host and compares every element");
    table.print_header();
  }

  return for_each_size(sweep, [&](int64_t size) {
    // At least one element; a size that is not a multiple of the element is rounded down.
    const int64_t count = std::max<int64_t>(1, size / static_cast<int64_t>(element_bytes));
    const int64_t bytes = count * static_cast<int64_t>(element_bytes);
    const std::size_t buffer_bytes = static_cast<std::size_t>(bytes);
    // herd's own device Tensors (cudaMalloc'ed, freed with them).
    Tensor input(DataType::kUInt8, {bytes}, device);
    Tensor output(DataType::kUInt8, {bytes}, device);
    // The input's values on the host, then the output of each path copied back.
    std::vector<unsigned char> host(buffer_bytes);
    fill_input(options.dtype, options.op, sweep.rank, host.data(), count);
    copy_to_device(input.data(), host.data(), buffer_bytes, stream.get());

    const SizeRun run(sweep, {bytes, count, to_string(options.op), allreduce_bus_factor(ranks)},
                      [&] { poison_device(output.data(), buffer_bytes, stream.get()); });
    const auto output_wrong = [&](const char* path) {
      return [&, path] {
        copy_to_host(host.data(), output.data(), buffer_bytes, stream.get());
        return count_wrong(options.dtype, options.op, ranks, sweep.rank, host.data(), count, path);
      };
    };

    const std::string name = "herd-bench/allreduce-gpu/" + std::to_string(bytes);
    const TensorView in{input.data(), options.dtype, {count}, device, stream.get()};
    const TensorView out{output.data(), options.dtype, {count}, device, stream.get()};
    int64_t wrong = run.measure(
        "herd", [&] { herd::allreduce(name, in, out, options.op); }, output_wrong("herd"));
    for (const auto& baseline : baselines.rows) {
      if (count > baseline->max_count()) continue;
      wrong += run.measure(
          baseline->path(),
          [&] {
            baseline->allreduce(input.data(), output.data(), count, options.dtype, options.op);
          },
          output_wrong(baseline->path()));
    }
    run.measure_ceiling("d2d", [&] {
      return time_device_copy(output.data(), input.data(), buffer_bytes, options.warmup,
                              options.iterations, stream.get());
    });
    return wrong;
  });
}

}  // namespace herd::bench
