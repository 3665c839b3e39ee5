// gpu_bench.h's step benchmark on GPU buffers (herd-bench step --device
// cuda): the gradients of a real model, laid out back to back in one input
// and one output arena of device memory, as in step_bench.cc. The paths, in
// the order of their rows:
//   herd:                 herd::allreduce_async on a GPU view of each
//                         gradient as it is produced, then a wait for all
//                         (fused into herd's device buffer).
//   herd-nofusion:        the same with HERD_FUSION_THRESHOLD=0.
//   nccl-one-buffer:      the whole backward first, then one ncclAllReduce
//                         over the input arena into the output arena: every
//                         gradient already in one flat buffer, the best a
//                         framework that allocates its gradients as views of
//                         one bucket can do, with no copy at all.
//   nccl-one-buffer-inplace: the same in place on the output arena, which
//                         holds the input before each step (copied there
//                         untimed).
//   nccl-per-tensor:      one ncclAllReduce per gradient as it is produced,
//                         queued on one stream, synchronized at the end.
// Where NCCL cannot run (two ranks share a GPU, or no NCCL is built), one
// MPI_Allreduce over the whole arena staged through pinned host memory
// (mpi-staged-one-buffer) stands in for the NCCL rows.
// After each path the output arena is copied back and every element checked.
#include <string>
#include <vector>

#include <herd/herd.h>
#include <herd/tensor.h>

#include "benchmarks/herd_bench/gpu_baselines.h"
#include "benchmarks/herd_bench/gpu_bench.h"
#include "benchmarks/herd_bench/gpu_cuda.h"
#include "benchmarks/herd_bench/step_run.h"
#include "benchmarks/herd_bench/table.h"

namespace herd::bench {

int64_t run_gpu_step_bench(const StepBenchOptions& options, MPI_Comm comm) {
  const GpuPlacement placement = select_gpu(comm, herd::local_rank());
  const Device device = Device::gpu(placement.device);
  const CudaStream stream;  // declared before the baselines, which queue on it
  std::string declined;
  std::unique_ptr<GpuAllreduceBaseline> baseline =
      make_nccl_baseline(comm, placement, stream.get(), &declined);
  const bool nccl = baseline != nullptr;
  if (!nccl) baseline = make_mpi_staged_baseline(comm, stream.get());

  StepRun run(options, comm, nccl ? 5 : 3);
  const std::size_t bytes = static_cast<std::size_t>(run.total) * sizeof(float);
  Tensor input(DataType::kUInt8, {static_cast<int64_t>(bytes)}, device);
  Tensor output(DataType::kUInt8, {static_cast<int64_t>(bytes)}, device);
  copy_to_device(input.data(), run.input.data(), bytes, stream.get());
  run.poison = [&] { poison_device(output.data(), bytes, stream.get()); };
  run.fetch = [&] { copy_to_host(run.output.data(), output.data(), bytes, stream.get()); };
  const auto device_input = [&](const StepTensor& t) {
    return static_cast<float*>(input.data()) + t.offset;
  };
  const auto device_output = [&](const StepTensor& t) {
    return static_cast<float*>(output.data()) + t.offset;
  };

  StepTableInfo info = run.table_info("cuda (" + placement.name + ")");
  info.baseline = nccl ? "nccl" : "mpi";
  std::vector<StepPathResult> results;

  std::vector<TensorView> inputs, outputs;
  for (const StepTensor& t : run.plan) {
    inputs.push_back(
        TensorView{device_input(t), DataType::kFloat32, t.shape, device, stream.get()});
    outputs.push_back(
        TensorView{device_output(t), DataType::kFloat32, t.shape, device, stream.get()});
  }
  run.measure_herd_paths("herd-bench/step-gpu/", inputs, outputs, &results);

  const auto after_backward = [&] {
    BackwardClock clock(/*submission_blocks=*/false);
    for (const StepTensor& t : run.plan) clock.wait_for_gradient(t.gap_seconds);
  };
  results.push_back(run.measure(nccl ? "nccl-one-buffer" : "mpi-staged-one-buffer", [&] {
    after_backward();
    baseline->allreduce(input.data(), output.data(), run.total, DataType::kFloat32, ReduceOp::kSum);
  }));
  results.back().baseline = true;
  if (nccl) {
    results.push_back(run.measure(
        "nccl-one-buffer-inplace",
        [&] {
          after_backward();
          baseline->allreduce(output.data(), output.data(), run.total, DataType::kFloat32,
                              ReduceOp::kSum);
        },
        [&] {
          HERD_BENCH_CUDA(cudaMemcpyAsync(output.data(), input.data(), bytes,
                                          cudaMemcpyDeviceToDevice, stream.get()));
          HERD_BENCH_CUDA(cudaStreamSynchronize(stream.get()));
        }));
    results.back().baseline = true;
    results.push_back(run.measure("nccl-per-tensor", [&] {
      BackwardClock clock(/*submission_blocks=*/false);
      for (const StepTensor& t : run.plan) {
        clock.wait_for_gradient(t.gap_seconds);
        baseline->enqueue_allreduce(device_input(t), device_output(t), t.count, DataType::kFloat32,
                                    ReduceOp::kSum);
      }
      baseline->synchronize();
    }));
    results.back().baseline = true;
  }

  if (run.rank == 0) {
    const Table notes(stdout, options.csv);
    notes.print_note("device: cuda: GPU " + std::to_string(placement.device) + " (" +
                     placement.name + ") on rank 0; gradients in two cudaMalloc'ed arenas");
    notes.print_note(nccl ? baseline->note()
                          : "nccl: skipped, " + declined + "; " + baseline->note());
    print_step_table(info, results, options.csv);
  }
  int64_t wrong = 0;
  for (const StepPathResult& result : results) wrong += result.wrong;
  return wrong;
}

}  // namespace herd::bench
