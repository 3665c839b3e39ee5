#include "benchmarks/herd_bench/step_bench.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <herd/herd.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/step_plan.h"
#include "benchmarks/herd_bench/step_table.h"
#include "benchmarks/herd_bench/table.h"

namespace herd::bench {
namespace {

// The paths, in the order of their rows. Each step submits every gradient of
// the model in backward order (step_plan.h), each after its share of the
// backward compute (BackwardClock), and reduces them with a sum:
//   herd:           herd::allreduce_async for each gradient as it is
//                   produced, then a wait for all of them; fusion as the
//                   runtime is configured (its default threshold unless
//                   HERD_FUSION_THRESHOLD says otherwise).
//   herd-nofusion:  the same after restarting herd with
//                   HERD_FUSION_THRESHOLD=0: one allreduce per gradient.
//   mpi-fused:      the whole backward first, then the gradients copied into
//                   one buffer, one MPI_Allreduce over it, and the results
//                   copied out (both copies timed).
//   mpi-per-tensor: one blocking MPI_Allreduce per gradient as it is
//                   produced; the next layer's backward waits for it.
// All paths read the same input arena and write the same output arena.
constexpr const char* kHerd = "herd";
constexpr const char* kHerdNoFusion = "herd-nofusion";
constexpr const char* kMpiFused = "mpi-fused";
constexpr const char* kMpiPerTensor = "mpi-per-tensor";
constexpr int kPathCount = 4;

// herd reads its settings at herd::init; this one turns fusion off.
constexpr const char* kFusionThresholdVariable = "HERD_FUSION_THRESHOLD";

using Clock = std::chrono::steady_clock;

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
  explicit BackwardClock(bool submission_blocks)
      : submission_blocks_(submission_blocks), deadline_(Clock::now()) {}

  void wait_for_gradient(double gap_seconds) {
    // --backward-ms 0: communication alone, without reading the clock. (With
    // a positive total every gap is positive: every gradient has elements.)
    if (gap_seconds <= 0) return;
    if (submission_blocks_) deadline_ = std::max(deadline_, Clock::now());
    deadline_ +=
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_seconds));
    std::this_thread::sleep_until(deadline_);
  }

 private:
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
  FineTimerSlack() {
    previous_ = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
    if (previous_ < 0) throw std::system_error(errno, std::generic_category(), "PR_GET_TIMERSLACK");
    if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0) {
      throw std::system_error(errno, std::generic_category(), "PR_SET_TIMERSLACK");
    }
  }
  // A failure here leaves the slack fine, which harms nothing.
  ~FineTimerSlack() { prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_), 0, 0, 0); }
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
  ScopedEnvironment(const char* variable, const char* value) : variable_(variable) {
    if (const char* old = std::getenv(variable)) previous_ = old;
    if (setenv(variable, value, 1) != 0) {
      throw std::system_error(errno, std::generic_category(), std::string("setenv ") + variable);
    }
  }
  // A failure here only leaves the variable as this set it.
  ~ScopedEnvironment() {
    if (previous_) {
      setenv(variable_, previous_->c_str(), 1);
    } else {
      unsetenv(variable_);
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  const char* variable_;
  std::optional<std::string> previous_;
};

// Sums `count` floats over the ranks of `comm`, `send` (or MPI_IN_PLACE)
// into `recv`. MPI counts are int: the buffer goes in pieces of at most
// INT_MAX elements (one piece for any gradient of these models).
void allreduce_floats(const void* send, float* recv, int64_t count, MPI_Comm comm) {
  for (int64_t done = 0; done < count;) {
    const int piece = static_cast<int>(std::min<int64_t>(count - done, INT_MAX));
    const void* piece_send =
        send == MPI_IN_PLACE ? MPI_IN_PLACE : static_cast<const float*>(send) + done;
    check_mpi(MPI_Allreduce(piece_send, recv + done, piece, MPI_FLOAT, MPI_SUM, comm),
              "MPI_Allreduce");
    done += piece;
  }
}

// The buffers of the whole benchmark, allocated once and shared by every
// path, and the timing and check every path runs through.
struct StepRun {
  StepRun(const StepBenchOptions& options, MPI_Comm comm) : options(options), comm(comm) {}

  const StepBenchOptions& options;
  MPI_Comm comm;
  int rank = 0;
  int ranks = 1;
  std::vector<StepTensor> plan;  // backward order
  int64_t total = 0;             // elements over all gradients
  std::vector<float> input;      // every gradient, registration order
  std::vector<float> output;     // every result, registration order
  int paths_run = 0;             // for the progress lines

  float* input_of(const StepTensor& t) { return input.data() + t.offset; }
  float* output_of(const StepTensor& t) { return output.data() + t.offset; }

  // Runs `step` -w times and then -n times, each after a barrier so that
  // every rank starts the step together, and times the -n. The output is
  // poisoned (NaN) before the last step, untimed, so the check sees that
  // step's results and a path that writes nothing cannot pass.
  template <typename StepFn>
  StepPathResult measure(const char* path, StepFn&& step) {
    ++paths_run;
    if (rank == 0 && !options.quiet)
      std::fprintf(stderr, "[%d/%d] %s\n", paths_run, kPathCount, path);
    const int steps = options.warmup + options.iterations;
    std::vector<double> seconds(static_cast<std::size_t>(options.iterations));
    {
      FineTimerSlack slack;
      for (int i = 0; i < steps; ++i) {
        if (i == steps - 1) std::fill(output.begin(), output.end(), std::nanf(""));
        check_mpi(MPI_Barrier(comm), "MPI_Barrier");
        const double start = MPI_Wtime();
        step();
        const double elapsed = MPI_Wtime() - start;
        if (i >= options.warmup) seconds[static_cast<std::size_t>(i - options.warmup)] = elapsed;
      }
    }
    // A step lasts until its slowest rank is done: the maximum per step.
    std::vector<double> slowest(seconds.size());
    check_mpi(MPI_Reduce(seconds.data(), slowest.data(), options.iterations, MPI_DOUBLE, MPI_MAX, 0,
                         comm),
              "MPI_Reduce");
    const int64_t local_wrong = count_wrong(path);
    StepPathResult result;
    result.path = path;
    check_mpi(MPI_Allreduce(&local_wrong, &result.wrong, 1, MPI_INT64_T, MPI_SUM, comm),
              "MPI_Allreduce");
    if (rank == 0) result.stats = summarize_steps(slowest);
    return result;
  }

  // Every element of every gradient against its closed form. Prints the
  // first wrong element of this rank to stderr, and how many gradients were
  // wrong if more than one.
  int64_t count_wrong(const char* path) {
    int64_t wrong = 0;
    int wrong_tensors = 0;
    for (const StepTensor& t : plan) {
      int64_t first = 0;
      const int64_t n = count_wrong_step(output_of(t), t.count, t.index, ranks, &first);
      if (n == 0) continue;
      if (wrong_tensors == 0) {
        std::fprintf(stderr,
                     "rank %d: %s path, gradient %s, element %lld of %lld: expected %.0f, actual "
                     "%g\n",
                     rank, path, t.name.c_str(), static_cast<long long>(first),
                     static_cast<long long>(t.count), step_expected_value(t.index, ranks, first),
                     static_cast<double>(output_of(t)[first]));
      }
      wrong += n;
      ++wrong_tensors;
    }
    if (wrong_tensors > 1) {
      std::fprintf(stderr, "rank %d: %s path: %lld wrong elements in %d of %zu gradients\n", rank,
                   path, static_cast<long long>(wrong), wrong_tensors, plan.size());
    }
    return wrong;
  }
};

}  // namespace

CLI::App* add_step_command(CLI::App& app, StepBenchOptions& options) {
  CLI::App* command = app.add_subcommand(
      "step", "A model's gradients reduced as a backward pass produces them, per training step");
  // By name, case-insensitively; IsMember hands the callback the name as
  // spelled in `models`.
  const std::map<std::string, Model> models{{to_string(Model::kResNet50), Model::kResNet50},
                                            {to_string(Model::kBertBase), Model::kBertBase}};
  std::vector<std::string> names;
  for (const auto& entry : models) names.push_back(entry.first);
  command
      ->add_option_function<std::string>(
          "--model",
          [&options, models](const std::string& name) { options.model = models.at(name); },
          "Model whose gradients one step reduces")
      ->transform(CLI::IsMember(names, CLI::ignore_case))
      ->default_str(to_string(options.model));
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
  command->add_flag("-q,--quiet", options.quiet, "No progress lines on stderr");
  return command;
}

int64_t run_step_bench(const StepBenchOptions& options, MPI_Comm comm) {
  StepRun run(options, comm);
  check_mpi(MPI_Comm_rank(comm, &run.rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(comm, &run.ranks), "MPI_Comm_size");
  if (run.ranks != herd::size()) throw std::runtime_error("herd-bench: comm is not herd's world");

  run.plan = plan_step(model_parameters(options.model), options.backward_ms / 1e3);
  for (const StepTensor& t : run.plan) run.total += t.count;
  run.input.resize(static_cast<std::size_t>(run.total));
  run.output.resize(static_cast<std::size_t>(run.total));
  for (const StepTensor& t : run.plan) fill_step_input(t.index, run.rank, run.input_of(t), t.count);

  StepTableInfo info;
  info.model = to_string(options.model);
  info.ranks = run.ranks;
  info.tensors = static_cast<int>(run.plan.size());
  info.elements = run.total;
  info.bytes = run.total * static_cast<int64_t>(sizeof(float));
  info.backward_ms = options.backward_ms;
  info.iterations = options.iterations;
  info.warmup = options.warmup;
  if (const char* threshold = std::getenv(kFusionThresholdVariable)) {
    info.fusion_threshold = threshold;
  }
  std::vector<StepPathResult> results;

  // herd and herd-nofusion: the same step, before and after the restart.
  std::vector<std::string> names;
  std::vector<TensorView> inputs, outputs;
  for (const StepTensor& t : run.plan) {
    names.push_back("herd-bench/step/" + t.name);
    inputs.push_back(TensorView{run.input_of(t), DataType::kFloat32, t.shape});
    outputs.push_back(TensorView{run.output_of(t), DataType::kFloat32, t.shape});
  }
  std::vector<Handle> handles(run.plan.size());
  const auto herd_step = [&] {
    BackwardClock clock(/*submission_blocks=*/false);
    for (std::size_t k = 0; k < run.plan.size(); ++k) {
      clock.wait_for_gradient(run.plan[k].gap_seconds);
      handles[k] = herd::allreduce_async(names[k], inputs[k], outputs[k], ReduceOp::kSum);
    }
    for (const Handle& handle : handles) herd::wait(handle);
  };
  results.push_back(run.measure(kHerd, herd_step));
  // herd reads HERD_FUSION_THRESHOLD at init: shut down, set it, start
  // again. This works because herd-bench, not herd, initialized MPI, so
  // herd::shutdown leaves MPI running; afterwards herd restarts as it was.
  herd::shutdown();
  {
    const ScopedEnvironment fusion_off(kFusionThresholdVariable, "0");
    herd::init();
    results.push_back(run.measure(kHerdNoFusion, herd_step));
    herd::shutdown();
  }
  herd::init();

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
    results.back().mpi_baseline = true;
  }
  results.push_back(run.measure(kMpiPerTensor, [&] {
    BackwardClock clock(/*submission_blocks=*/true);
    for (const StepTensor& t : run.plan) {
      clock.wait_for_gradient(t.gap_seconds);
      allreduce_floats(run.input_of(t), run.output_of(t), t.count, mpi_comm.get());
    }
  }));
  results.back().mpi_baseline = true;

  if (run.rank == 0) print_step_table(info, results, options.csv);
  int64_t wrong = 0;
  for (const StepPathResult& result : results) wrong += result.wrong;
  return wrong;
}

}  // namespace herd::bench
