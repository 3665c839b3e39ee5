#include "benchmarks/herd_bench/step_run.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <system_error>
#include <thread>

#include <herd/herd.h>
#include <herd/train/progress.h>

#include "benchmarks/herd_bench/bench_mpi.h"

namespace herd::bench {
namespace {

// herd reads its settings at herd::init; this one turns fusion off.
constexpr const char* kFusionThresholdVariable = "HERD_FUSION_THRESHOLD";

}  // namespace

BackwardClock::BackwardClock(bool submission_blocks)
    : submission_blocks_(submission_blocks), deadline_(Clock::now()) {}

void BackwardClock::wait_for_gradient(double gap_seconds) {
  // --backward-ms 0: communication alone, without reading the clock. (With
  // a positive total every gap is positive: every gradient has elements.)
  if (gap_seconds <= 0) return;
  if (submission_blocks_) deadline_ = std::max(deadline_, Clock::now());
  deadline_ +=
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(gap_seconds));
  std::this_thread::sleep_until(deadline_);
}

FineTimerSlack::FineTimerSlack() {
  previous_ = prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0);
  if (previous_ < 0) throw std::system_error(errno, std::generic_category(), "PR_GET_TIMERSLACK");
  if (prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0) != 0) {
    throw std::system_error(errno, std::generic_category(), "PR_SET_TIMERSLACK");
  }
}

// A failure here leaves the slack fine, which harms nothing.
FineTimerSlack::~FineTimerSlack() {
  prctl(PR_SET_TIMERSLACK, static_cast<unsigned long>(previous_), 0, 0, 0);
}

ScopedEnvironment::ScopedEnvironment(const char* variable, const char* value)
    : variable_(variable) {
  if (const char* old = std::getenv(variable)) previous_ = old;
  if (setenv(variable, value, 1) != 0) {
    throw std::system_error(errno, std::generic_category(), std::string("setenv ") + variable);
  }
}

// A failure here only leaves the variable as this set it.
ScopedEnvironment::~ScopedEnvironment() {
  if (previous_) {
    setenv(variable_, previous_->c_str(), 1);
  } else {
    unsetenv(variable_);
  }
}

StepRun::StepRun(const StepBenchOptions& options, MPI_Comm comm, int path_count)
    : options(options), comm(comm), path_count(path_count) {
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HERD_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  if (ranks != herd::size()) throw std::runtime_error("herd-bench: comm is not herd's world");
  plan = plan_step(model_parameters(options.model), options.backward_ms / 1e3);
  for (const StepTensor& t : plan) total += t.count;
  input.resize(static_cast<std::size_t>(total));
  output.resize(static_cast<std::size_t>(total));
  for (const StepTensor& t : plan) fill_step_input(t.index, rank, input_of(t), t.count);
}

StepTableInfo StepRun::table_info(const std::string& device) const {
  StepTableInfo info;
  info.model = to_string(options.model);
  info.device = device;
  info.ranks = ranks;
  info.tensors = static_cast<int>(plan.size());
  info.elements = total;
  info.bytes = total * static_cast<int64_t>(sizeof(float));
  info.backward_ms = options.backward_ms;
  info.iterations = options.iterations;
  info.warmup = options.warmup;
  if (const char* threshold = std::getenv(kFusionThresholdVariable)) {
    info.fusion_threshold = threshold;
  }
  return info;
}

StepPathResult StepRun::measure(const char* path, const std::function<void()>& step,
                                const std::function<void()>& prepare, bool checked) {
  ++paths_run;
  // Rank 0: the path's line, then its steps (in place, or a line every few
  // seconds where stderr is not a terminal: a long path shows it is alive).
  const ProgressStyle style =
      rank == 0 ? progress_style(options.progress, is_terminal(stderr)) : ProgressStyle::kOff;
  const std::string label =
      "[" + std::to_string(paths_run) + "/" + std::to_string(path_count) + "] " + path;
  if (style == ProgressStyle::kLines) std::fprintf(stderr, "%s\n", label.c_str());
  ProgressDisplay progress(stderr, style);
  const int steps = options.warmup + options.iterations;
  std::vector<double> seconds(static_cast<std::size_t>(options.iterations));
  {
    FineTimerSlack slack;
    for (int i = 0; i < steps; ++i) {
      if (i == steps - 1) poison();
      if (prepare) prepare();
      HERD_MPI_CHECK(MPI_Barrier(comm));
      const double start = MPI_Wtime();
      step();
      const double elapsed = MPI_Wtime() - start;
      if (i >= options.warmup) seconds[static_cast<std::size_t>(i - options.warmup)] = elapsed;
      if (progress.due()) {
        progress.show(label + ": step " + std::to_string(i + 1) + "/" + std::to_string(steps));
      }
    }
    progress.clear();
  }
  // A step lasts until its slowest rank is done: the maximum per step.
  std::vector<double> slowest(seconds.size());
  HERD_MPI_CHECK(
      MPI_Reduce(seconds.data(), slowest.data(), options.iterations, MPI_DOUBLE, MPI_MAX, 0, comm));
  int64_t local_wrong = 0;
  if (checked) {
    fetch();
    local_wrong = check(path);
  }
  StepPathResult result;
  result.path = path;
  HERD_MPI_CHECK(MPI_Allreduce(&local_wrong, &result.wrong, 1, MPI_INT64_T, MPI_SUM, comm));
  if (rank == 0) result.stats = summarize_steps(slowest);
  return result;
}

void StepRun::measure_herd_paths(const std::string& name_prefix,
                                 const std::vector<TensorView>& inputs,
                                 const std::vector<TensorView>& outputs,
                                 std::vector<StepPathResult>* results,
                                 const std::vector<TensorView>* in_place,
                                 const std::function<void()>& reset_in_place) {
  std::vector<std::string> names, in_place_names;
  for (const StepTensor& t : plan) {
    names.push_back(name_prefix + t.name);
    in_place_names.push_back(name_prefix + "inplace/" + t.name);
  }
  std::vector<Handle> handles(plan.size());
  const auto step_over = [&](const std::vector<std::string>& step_names,
                             const std::vector<TensorView>& from,
                             const std::vector<TensorView>& to) {
    // The vectors outlive the step; the lambda keeps their addresses.
    return [this, &handles, step_names = &step_names, from = &from, to = &to] {
      BackwardClock clock(/*submission_blocks=*/false);
      for (std::size_t k = 0; k < plan.size(); ++k) {
        clock.wait_for_gradient(plan[k].gap_seconds);
        handles[k] = herd::allreduce_async((*step_names)[k], (*from)[k], (*to)[k], ReduceOp::kSum);
      }
      for (const Handle& handle : handles) herd::wait(handle);
    };
  };
  const std::function<void()> herd_step = step_over(names, inputs, outputs);
  results->push_back(measure("herd", herd_step));
  if (in_place != nullptr) {
    results->push_back(
        measure("herd-inplace", step_over(in_place_names, *in_place, *in_place), reset_in_place));
  }
  // herd reads HERD_FUSION_THRESHOLD at init: shut down, set it, start
  // again. This works because herd-bench, not herd, initialized MPI, so
  // herd::shutdown leaves MPI running; afterwards herd restarts as it was.
  herd::shutdown();
  {
    const ScopedEnvironment fusion_off(kFusionThresholdVariable, "0");
    herd::init();
    results->push_back(measure("herd-nofusion", herd_step));
    herd::shutdown();
  }
  herd::init();
}

int64_t StepRun::count_wrong(const char* path) {
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

void StepRun::fill_output_with_nan() { std::fill(output.begin(), output.end(), std::nanf("")); }

}  // namespace herd::bench
