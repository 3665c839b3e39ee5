// The machinery every path of herd-bench's step benchmark runs through, on
// the CPU (step_bench.cc) and on GPU buffers (gpu_step_bench.cc): the
// backward compute's clock, fine timer slack while steps run, a scoped
// environment variable for restarting herd with other settings, and StepRun,
// which owns the step's plan and host buffers and times and checks one path.
//
// Called by herd-bench's main thread on every rank, collectively.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "benchmarks/herd_bench/step_bench.h"
#include "benchmarks/herd_bench/step_plan.h"
#include "benchmarks/herd_bench/step_table.h"
#include "herd/tensor.h"

namespace herd::bench {

// Stands for the backward pass's compute: before each gradient is submitted,
// the step's thread sleeps until that gradient's layer would be done. Asleep,
// not busy: the compute stands for a GPU's (or otherwise offloaded) work, and
// on a machine with as many ranks as cores a busy loop would take the CPU
// from the communication it is meant to overlap with.
//
// The deadlines follow the backward's own clock, layer k done gap_k after
// layer k-1, which runs on while the thread submits to herd (a submission
// returns at once, as a GPU's backward goes on while its host thread
// enqueues). Where the submission blocks (mpi-per-tensor), the next layer
// starts only when the call returns: the thread that would launch it is the
// one waiting in MPI. Deadlines, rather than one sleep per gap, keep each
// wake-up's lateness from adding up over a model's hundreds of gradients.
class BackwardClock {
 public:
  explicit BackwardClock(bool submission_blocks);
  void wait_for_gradient(double gap_seconds);

 private:
  using Clock = std::chrono::steady_clock;
  bool submission_blocks_;
  Clock::time_point deadline_;
};

// Linux lets a sleeping thread wake up to its "timer slack" (50 us by
// default) late; over a step's hundreds of gaps that would stretch the
// backward pass by milliseconds. This asks for 1 ns on the calling thread
// while it lives (threads started meanwhile would inherit it, so herd is not
// restarted inside one) and puts the old value back afterwards.
class FineTimerSlack {
 public:
  FineTimerSlack();
  ~FineTimerSlack();
  FineTimerSlack(const FineTimerSlack&) = delete;
  FineTimerSlack& operator=(const FineTimerSlack&) = delete;

 private:
  int previous_ = 0;
};

// Sets an environment variable while it lives, then puts back the old value
// (or unsets it). Used only while herd is shut down, so no herd thread reads
// the environment meanwhile; herd::init reads it when it starts again.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* variable, const char* value);
  ~ScopedEnvironment();
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* variable_;
  std::optional<std::string> previous_;
};

// The plan and host buffers of the whole benchmark, allocated once and
// shared by every path, and the timing and check every path runs through.
struct StepRun {
  // Plans the step of options.model on the ranks of `comm`, which must be
  // herd's world, and fills the host input with this rank's values.
  StepRun(const StepBenchOptions& options, MPI_Comm comm, int path_count);

  const StepBenchOptions& options;
  MPI_Comm comm;
  int path_count;  // for the progress lines
  int rank = 0;
  int ranks = 1;
  std::vector<StepTensor> plan;  // backward order
  int64_t total = 0;             // elements over all gradients
  std::vector<float> input;      // every gradient, registration order
  std::vector<float> output;     // every result, registration order
  int paths_run = 0;

  // Where the paths write (GPU buffers, say) when not in `output`: poison
  // fills that memory with NaN, fetch copies it into `output` for the check.
  std::function<void()> poison = [this] { fill_output_with_nan(); };
  std::function<void()> fetch = [] {};
  // How measure() checks `output` after a path's last step, returning the
  // wrong elements on this rank: every gradient against its sum over the
  // ranks unless a benchmark expects other values (herd-bench kvstore).
  std::function<int64_t(const char* path)> check = [this](const char* path) {
    return count_wrong(path);
  };

  float* input_of(const StepTensor& t) { return input.data() + t.offset; }
  float* output_of(const StepTensor& t) { return output.data() + t.offset; }

  // The notes' facts about this run.
  StepTableInfo table_info(const std::string& device) const;

  // Runs `step` -w times and then -n times, each after `prepare` (untimed)
  // and a barrier so that every rank starts the step together, and times
  // the -n. The output is poisoned before the last step, untimed, so the
  // check sees that step's results and a path that writes nothing cannot
  // pass. Without `checked` (the floor, which reduces nothing) the output
  // is not checked and the row's wrong stays 0.
  StepPathResult measure(const char* path, const std::function<void()>& step,
                         const std::function<void()>& prepare = nullptr, bool checked = true);

  // The rows herd and herd-nofusion: every gradient's view (`inputs`,
  // `outputs`, in the plan's order) submitted with herd::allreduce_async as
  // it is produced, under the name `name_prefix` + its parameter's name, then
  // a wait for all; the second row after restarting herd with
  // HERD_FUSION_THRESHOLD=0. herd runs as before afterwards. With
  // `in_place` (one view per gradient, in the plan's order), the row
  // herd-inplace comes between them: the same step with every gradient
  // reduced in its own buffer (input == output, as an optimizer reduces its
  // gradients, under the names `name_prefix` + "inplace/" + the parameter's),
  // `reset_in_place` putting the input back into those buffers before each
  // step, untimed. With options.herd_only, the row herd alone.
  void measure_herd_paths(const std::string& name_prefix, const std::vector<TensorView>& inputs,
                          const std::vector<TensorView>& outputs,
                          std::vector<StepPathResult>* results,
                          const std::vector<TensorView>* in_place = nullptr,
                          const std::function<void()>& reset_in_place = nullptr);

  // Every element of every gradient in `output` against its closed form.
  // Prints the first wrong element of this rank to stderr, and how many
  // gradients were wrong if more than one.
  int64_t count_wrong(const char* path);

 private:
  void fill_output_with_nan();
};

}  // namespace herd::bench
