#include "benchmarks/herd_bench/step_bench.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/cli_options.h"
#include "benchmarks/herd_bench/gpu_bench.h"
#include "benchmarks/herd_bench/step_plan.h"
#include "benchmarks/herd_bench/step_run.h"
#include "benchmarks/herd_bench/step_table.h"

namespace herd::bench {
namespace {

// The paths, in the order of their rows. Each step submits every gradient of
// the model in backward order (step_plan.h), each after its share of the
// backward compute (BackwardClock), and reduces them with a sum:
//   herd:           herd::allreduce_async for each gradient as it is
//                   produced, then a wait for all of them; fusion as the
//                   runtime is configured (its default threshold unless
//                   HERD_FUSION_THRESHOLD says otherwise).
//   herd-inplace:   the same with every gradient reduced in its own buffer
//                   (input == output), as a DistributedOptimizer does.
//   herd-nofusion:  herd's out-of-place step after restarting herd with
//                   HERD_FUSION_THRESHOLD=0: one allreduce per gradient.
//   herd-shared:    herd-inplace in an arena of its own, one
//                   herd::SharedBuffer: the ranks of a machine reduce
//                   straight from each other's memory.
//   mpi-fused:      the whole backward first, then the gradients copied into
//                   one buffer, one MPI_Allreduce in place over it, and the
//                   results copied out (both copies timed).
//   mpi-per-tensor: one blocking MPI_Allreduce(input, output) per gradient
//                   as it is produced; the next layer's backward waits for it.
//   mpi-per-tensor-inplace: the same with MPI_Allreduce(MPI_IN_PLACE,
//                   gradient), which MPI libraries often run faster (no copy
//                   of the input first).
//   floor:          every rank copies all its gradients into the other arena
//                   (one memcpy), all ranks at once: the memory-traffic floor
//                   of a step on this machine. Not a reduction: no check.
// The out-of-place paths read the input arena and write the output arena.
// The in-place ones reduce in the output arena (herd-shared in its own),
// which the input is copied into before each step, untimed, so that every
// step reduces the same values (a repeated sum would grow without bound) and
// the last one is checked.
// speedup compares each row with the fastest mpi row of the run, in place or
// not (step_ratios.h). With --device cuda the paths are gpu_step_bench.cc's
// instead.
constexpr const char* kMpiFused = "mpi-fused";
constexpr const char* kMpiPerTensor = "mpi-per-tensor";
constexpr const char* kMpiPerTensorInPlace = "mpi-per-tensor-inplace";
constexpr const char* kFloor = "floor";
constexpr const char* kHerdShared = "herd-shared";
constexpr int kPathCount = 8;

// Sums `count` floats over the ranks of `comm`, `send` (or MPI_IN_PLACE)
// into `recv`. MPI counts are int: the buffer goes in pieces of at most
// INT_MAX elements (one piece for any gradient of these models).
void allreduce_floats(const void* send, float* recv, int64_t count, MPI_Comm comm) {
  for (int64_t done = 0; done < count;) {
    const int piece = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    const void* piece_send =
        send == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const float*>(send) + done;
    HERD_MPI_CHECK(MPI_Allreduce(piece_send, recv + done, piece, MPI_FLOAT, MPI_SUM, comm));
    done += piece;
  }
}

}  // namespace

void add_model_option(CLI::App& command, Model& model, const std::string& help) {
  // IsMember hands the callback the name as spelled in `models`.
  const std::map<std::string, Model> models{{to_string(Model::kResNet50), Model::kResNet50},
                                            {to_string(Model::kBertBase), Model::kBertBase}};
  std::vector<std::string> names;
  for (const auto& entry : models) names.push_back(entry.first);
  command
      .add_option_function<std::string>(
          "--model", [&model, models](const std::string& name) { model = models.at(name); }, help)
      ->transform(CLI::IsMember(names, CLI::ignore_case))
      ->default_str(to_string(model));
}

CLI::App* add_step_command(CLI::App& app, StepBenchOptions& options) {
  CLI::App* command = app.add_subcommand(
      "step", "A model's gradients reduced as a backward pass produces them, per training step");
  add_model_option(*command, options.model, "Model whose gradients one step reduces");
  command->add_option("-n,--iters", options.iterations, "Timed steps per path")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("-w,--warmup_iters", options.warmup, "Untimed steps before them")
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option("--backward-ms", options.backward_ms,
                   "Backward compute per step in ms, slept before the gradients in proportion to "
                   "their sizes (0: communication alone)")
      ->check(CLI::Range(0.0, 1e6));
  command->add_flag("--csv", options.csv, "Print the table as CSV on stdout (notes on stderr)");
  add_progress_options(*command, options.progress);
  add_device_option(*command, options.device);
  return command;
}

int64_t run_step_bench(const StepBenchOptions& options, MPI_Comm comm) {
  if (options.device == BenchDevice::kCuda) return run_gpu_step_bench(options, comm);
  StepRun run(options, comm, kPathCount);
  StepTableInfo info = run.table_info("cpu");
  info.baseline = "mpi";
  std::vector<StepPathResult> results;

  // herd and herd-nofusion: the same step, before and after the restart.
  std::vector<TensorView> inputs, outputs;
  for (const StepTensor& t : run.plan) {
    inputs.push_back(TensorView{run.input_of(t), DataType::kFloat32, t.shape});
    outputs.push_back(TensorView{run.output_of(t), DataType::kFloat32, t.shape});
  }
  const std::size_t arena_bytes = static_cast<std::size_t>(run.total) * sizeof(float);
  const auto reset_in_place = [&] {
    std::memcpy(run.output.data(), run.input.data(), arena_bytes);
  };
  run.measure_herd_paths("herd-bench/step/", inputs, outputs, &results, &outputs, reset_in_place);
  {
    // herd-inplace in a shared arena, poisoned and checked through `output`.
    SharedBuffer arena(arena_bytes);
    auto* shared = static_cast<float*>(arena.data());
    std::vector<TensorView> views;
    std::vector<std::string> names;
    for (const StepTensor& t : run.plan) {
      views.push_back(TensorView{shared + t.offset, DataType::kFloat32, t.shape});
      names.push_back("herd-bench/step/shared/" + t.name);
    }
    const auto poison = run.poison;
    const auto fetch = run.fetch;
    run.poison = [&] {
      std::fill(shared, shared + run.total, std::numeric_limits<float>::quiet_NaN());
    };
    run.fetch = [&] { std::memcpy(run.output.data(), shared, arena_bytes); };
    std::vector<Handle> handles(run.plan.size());
    results.push_back(run.measure(
        kHerdShared,
        [&] {
          BackwardClock clock(/*submission_blocks=*/false);
          for (std::size_t k = 0; k < run.plan.size(); ++k) {
            clock.wait_for_gradient(run.plan[k].gap_seconds);
            handles[k] = herd::allreduce_async(names[k], views[k], views[k], ReduceOp::kSum);
          }
          for (const Handle& handle : handles) herd::wait(handle);
        },
        [&] { std::memcpy(shared, run.input.data(), arena_bytes); }));
    run.poison = poison;
    run.fetch = fetch;
  }

  // The MPI paths on their own communicator, so that their traffic never
  // meets the barriers and reductions on `comm`.
  const DupComm mpi_comm(comm);
  {
    std::vector<float> packed(static_cast<std::size_t>(run.total));  // this path's alone
    results.push_back(run.measure(kMpiFused, [&] {
      BackwardClock clock(/*submission_blocks=*/false);
      for (const StepTensor& t : run.plan) clock.wait_for_gradient(t.gap_seconds);
      for (const StepTensor& t : run.plan) {
        std::memcpy(packed.data() + t.packed_offset, run.input_of(t),
                    static_cast<std::size_t>(t.count) * sizeof(float));
      }
      allreduce_floats(MPI_IN_PLACE, packed.data(), run.total, mpi_comm.get());
      for (const StepTensor& t : run.plan) {
        std::memcpy(run.output_of(t), packed.data() + t.packed_offset,
                    static_cast<std::size_t>(t.count) * sizeof(float));
      }
    }));
    results.back().baseline = true;
  }
  results.push_back(run.measure(kMpiPerTensor, [&] {
    BackwardClock clock(/*submission_blocks=*/true);
    for (const StepTensor& t : run.plan) {
      clock.wait_for_gradient(t.gap_seconds);
      allreduce_floats(run.input_of(t), run.output_of(t), t.count, mpi_comm.get());
    }
  }));
  results.back().baseline = true;
  results.push_back(run.measure(
      kMpiPerTensorInPlace,
      [&] {
        BackwardClock clock(/*submission_blocks=*/true);
        for (const StepTensor& t : run.plan) {
          clock.wait_for_gradient(t.gap_seconds);
          allreduce_floats(MPI_IN_PLACE, run.output_of(t), t.count, mpi_comm.get());
        }
      },
      reset_in_place));
  results.back().baseline = true;

  results.push_back(run.measure(
      kFloor, [&] { std::memcpy(run.output.data(), run.input.data(), arena_bytes); },
      /*prepare=*/nullptr, /*checked=*/false));
  results.back().floor = true;

  if (run.rank == 0) print_step_table(info, results, options.csv);
  int64_t wrong = 0;
  for (const StepPathResult& result : results) wrong += result.wrong;
  return wrong;
}

}  // namespace herd::bench
