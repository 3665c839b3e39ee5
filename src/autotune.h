// Autotuning (HERD_AUTOTUNE): during the first steps of a job, rank 0
// searches the settings that shape the global process set's allreduces and
// every rank applies each trial in the same cycle.
//
// The settings are few (four knobs, each on a log grid of a handful of
// values) and a trial's score is noisy (whole steps of the application, with
// its compute, measured on a shared machine). So the search is coordinate
// descent: from the configured values, each knob in turn climbs its grid one
// value at a time in whichever direction raises the score, the other knobs
// fixed, until a step down the grid scores no better; a pass over the knobs
// that moves none of them ends the search, and so does the end of the
// kMaxSearchPasses-th pass. Each later pass begins by measuring its best
// point again, so that a score the machine's load flattered once does not
// stand against neighbours measured later. A trial's score is the median of
// kSamplesPerTrial samples, each the bytes this rank's collectives carried
// over steps_per_sample steps divided by the time those steps took, which
// the steps' compute is part of: a setting that runs the allreduces faster
// but delays the next step scores lower. Steps are counted as Horovod's
// autotuner counts them, by tensor name: a sample ends with the cycle before
// the one that executes some name for the (steps_per_sample + 1)-th time.
//
// Travel of a decision: rank 0 raises a flag in the next cycle's agreement
// (cycle_bits.h); on seeing it every rank takes rank 0's broadcast of the
// trial right after the agreement and applies it before that cycle executes
// anything. docs/operations.md ("Autotuning") has the method and its cost.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/status.h"

namespace herd::detail {

// The values autotuning adjusts; every rank holds the same ones from the
// same cycle on.
struct TunedSettings {
  int64_t fusion_threshold_bytes = 0;   // HERD_FUSION_THRESHOLD
  int64_t fusion_max_tensor_bytes = 0;  // HERD_FUSION_MAX_TENSOR_BYTES, 0: no limit
  int64_t shm_chunk_bytes = 0;          // the shared-memory allreduce's chunk of a cached call
  int64_t ring_segment_bytes = 0;       // HERD_RING_SEGMENT_BYTES

  bool operator==(const TunedSettings& other) const;
};

// Coordinate descent over grids of values, maximising a score (see the top
// of this file). Pure: the caller measures each trial and reports its score.
class CoordinateSearch {
 public:
  // `grids[k]` lists knob k's values in the order the climb walks them;
  // `start[k]` indexes the first trial's value of knob k. A move must raise
  // the best score by more than `min_gain` (relative) to be taken. The
  // search ends after `max_passes` passes over the knobs (0: no limit),
  // which bounds it where noise keeps moving the best point.
  CoordinateSearch(std::vector<std::vector<int64_t>> grids, std::vector<std::size_t> start,
                   double min_gain = 0.0, int max_passes = 0);

  // The values to measure next, one per knob; the best ones once converged.
  std::vector<int64_t> trial() const;
  // The score of trial(); picks the next trial.
  void report(double score);
  bool converged() const { return converged_; }
  std::vector<int64_t> best() const;
  double best_score() const { return best_score_; }
  // Trials reported so far (a point measured again is not measured twice).
  int trials() const { return trials_; }

 private:
  std::vector<int64_t> values(const std::vector<std::size_t>& indices) const;
  // From the current knob and direction, the next point not yet measured;
  // moves on to the next direction or knob where the grid ends or a point
  // scored no better, and converges after a pass that moved nothing.
  void advance();
  // The current climb failed: the other direction, or the next knob.
  void turn();

  std::vector<std::vector<int64_t>> grids_;
  double min_gain_;
  int max_passes_;
  int passes_ = 0;  // passes over the knobs finished
  std::vector<std::size_t> best_;
  double best_score_ = 0.0;
  bool measuring_best_ = true;  // trial_ is best_, measured again
  std::vector<std::size_t> trial_;
  std::size_t knob_ = 0;
  int direction_ = +1;
  bool moved_on_knob_ = false;  // the current knob took a step in this pass
  bool moved_in_pass_ = false;
  bool converged_ = false;
  int trials_ = 0;
};

struct AutotuneOptions {
  int warmup_samples = 3;     // HERD_AUTOTUNE_WARMUP_SAMPLES: samples dropped at the start
  int steps_per_sample = 10;  // HERD_AUTOTUNE_STEPS_PER_SAMPLE
  std::string log_path;       // HERD_AUTOTUNE_LOG with %r replaced; empty: no log
  // The set has a shared-memory allreduce (on one host, or inside each host
  // of the hierarchical allreduce): tune its chunk.
  bool shm = false;
  std::size_t shm_slot_bytes = 0;  // the longest chunk it takes
};

// One trial as rank 0 broadcasts it: the settings from this cycle on, the
// score of the trial it replaces, and whether the search has ended (the
// settings are then the best found, fixed for the rest of the job).
struct AutotuneDecision {
  TunedSettings settings;
  double previous_score = 0.0;  // bytes/s
  bool final = false;
  double best_score = 0.0;  // bytes/s of the settings, when final
};

std::vector<uint8_t> encode(const AutotuneDecision& decision);
[[nodiscard]] Status decode(const std::vector<uint8_t>& bytes, AutotuneDecision* decision);

// Passes over the knobs after which the search ends, whatever moved.
constexpr int kMaxSearchPasses = 3;

// Samples per trial, of which the median is the trial's score.
constexpr int kSamplesPerTrial = 3;

// The grids the search walks for a job that starts from `start`: powers of
// two around the defaults, with the start's own value added where it lies
// off the grid.
std::vector<std::vector<int64_t>> autotune_grids(const TunedSettings& start,
                                                 const AutotuneOptions& options);

// One rank's part: rank 0 (`decides`) measures and searches, every rank
// applies and logs what rank 0 decided.
class Autotuner {
 public:
  using Clock = std::chrono::steady_clock;

  Autotuner(const TunedSettings& start, AutotuneOptions options, bool decides);

  // Rank 0, after a cycle that ran this rank's collectives: their names and
  // bytes. Ends samples and trials.
  void record(const std::vector<std::string>& names, int64_t bytes, Clock::time_point now);
  // Rank 0: a decision waits to be broadcast (raise the cycle's flag).
  bool decision_pending() const { return pending_.has_value(); }
  // Rank 0: the decision to broadcast, once.
  AutotuneDecision take_decision();
  // Every rank: the decision broadcast in cycle `cycle` takes effect; logs it.
  void applied(const AutotuneDecision& decision, uint64_t cycle, Clock::time_point now);
  // Tuning has ended on this rank (the final decision applied).
  bool finished() const { return finished_; }
  // The log's first failure, if any (the log is written best effort).
  const std::string& log_error() const { return log_error_; }

 private:
  TunedSettings settings_of(const std::vector<int64_t>& values) const;
  // Rank 0: the current sample ends at last_record_; after the trial's last
  // sample the next decision is pending.
  void end_sample();
  void log_row(const std::string& trial, uint64_t cycle, const TunedSettings& settings,
               double score);

  AutotuneOptions options_;
  bool decides_;
  CoordinateSearch search_;
  std::optional<AutotuneDecision> pending_;
  bool finished_ = false;
  bool trial_running_ = false;  // rank 0: the current trial's settings are applied
  int warmups_left_;
  // The current sample: since when, until the last cycle recorded, its
  // bytes, and each name's executions.
  Clock::time_point sample_start_;
  Clock::time_point last_record_;
  int64_t sample_bytes_ = 0;
  std::unordered_map<std::string, int> executions_;
  std::vector<double> samples_;  // of the current trial
  // Every rank: the trial being applied, for its log row once it ends.
  int trial_number_ = 0;
  uint64_t trial_cycle_ = 0;
  TunedSettings trial_settings_;
  std::ofstream log_;
  std::string log_error_;
};

}  // namespace herd::detail
