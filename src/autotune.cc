#include "src/autotune.h"

#include <algorithm>
#include <limits>
#include <utility>

#include <fmt/format.h>

#include "common/byte_codec.h"
#include "common/enforce.h"

namespace herd::detail {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

// Powers of two from `low` to `high`, both included.
std::vector<int64_t> powers_of_two(int64_t low, int64_t high) {
  std::vector<int64_t> values;
  for (int64_t value = low; value <= high; value *= 2) values.push_back(value);
  return values;
}

// `grid` with `value` added in ascending order where it is missing; `zero_last`:
// 0 means "no limit" and sorts after every other value.
std::vector<int64_t> with_value(std::vector<int64_t> grid, int64_t value, bool zero_last = false) {
  if (std::find(grid.begin(), grid.end(), value) != grid.end()) return grid;
  const auto rank = [zero_last](int64_t v) {
    return zero_last && v == 0 ? std::numeric_limits<int64_t>::max() : v;
  };
  const auto at = std::find_if(grid.begin(), grid.end(),
                               [&](int64_t existing) { return rank(existing) > rank(value); });
  grid.insert(at, value);
  return grid;
}

std::size_t index_of(const std::vector<int64_t>& grid, int64_t value) {
  const auto at = std::find(grid.begin(), grid.end(), value);
  HERD_ENFORCE(at != grid.end());
  return static_cast<std::size_t>(at - grid.begin());
}

std::vector<int64_t> values_of(const TunedSettings& settings) {
  return {settings.fusion_threshold_bytes, settings.fusion_max_tensor_bytes,
          settings.shm_chunk_bytes, settings.ring_segment_bytes};
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

bool TunedSettings::operator==(const TunedSettings& other) const {
  return values_of(*this) == values_of(other);
}

CoordinateSearch::CoordinateSearch(std::vector<std::vector<int64_t>> grids,
                                   std::vector<std::size_t> start, double min_gain, int max_passes)
    : grids_(std::move(grids)),
      min_gain_(min_gain),
      max_passes_(max_passes),
      best_(std::move(start)),
      trial_(best_) {
  HERD_ENFORCE_EQ(grids_.size(), best_.size());
  for (std::size_t k = 0; k < grids_.size(); ++k) HERD_ENFORCE_LT(best_[k], grids_[k].size());
}

std::vector<int64_t> CoordinateSearch::values(const std::vector<std::size_t>& indices) const {
  std::vector<int64_t> result;
  for (std::size_t k = 0; k < grids_.size(); ++k) result.push_back(grids_[k][indices[k]]);
  return result;
}

std::vector<int64_t> CoordinateSearch::trial() const { return values(converged_ ? best_ : trial_); }

std::vector<int64_t> CoordinateSearch::best() const { return values(best_); }

void CoordinateSearch::report(double score) {
  if (converged_) return;
  ++trials_;
  if (measuring_best_) {
    // The start, or the best point again at the start of a pass: its
    // neighbours are compared with a score taken under the same load.
    measuring_best_ = false;
    best_score_ = score;
    knob_ = 0;
    direction_ = +1;
    advance();
    return;
  }
  if (score > best_score_ * (1.0 + min_gain_)) {
    best_ = trial_;
    best_score_ = score;
    moved_on_knob_ = true;
    moved_in_pass_ = true;
  } else {
    turn();
  }
  advance();
}

void CoordinateSearch::turn() {
  // After a step up that scored no better, try down; after a climb that
  // moved, the knob has its best value: a step back was measured already.
  if (direction_ == +1 && !moved_on_knob_) {
    direction_ = -1;
    return;
  }
  direction_ = +1;
  moved_on_knob_ = false;
  ++knob_;
}

void CoordinateSearch::advance() {
  for (;;) {
    if (knob_ == grids_.size()) {
      ++passes_;
      if (!moved_in_pass_ || (max_passes_ > 0 && passes_ >= max_passes_)) {
        converged_ = true;
        return;
      }
      knob_ = 0;
      moved_in_pass_ = false;
      measuring_best_ = true;
      trial_ = best_;
      return;
    }
    const std::size_t at = best_[knob_];
    const bool inside = direction_ > 0 ? at + 1 < grids_[knob_].size() : at > 0;
    if (!inside) {
      turn();
      continue;
    }
    trial_ = best_;
    trial_[knob_] = direction_ > 0 ? at + 1 : at - 1;
    return;
  }
}

std::vector<uint8_t> encode(const AutotuneDecision& decision) {
  ByteWriter writer;
  for (int64_t value : values_of(decision.settings)) writer.i64(value);
  writer.f64(decision.previous_score);
  writer.u8(decision.final ? 1 : 0);
  writer.f64(decision.best_score);
  return writer.take();
}

Status decode(const std::vector<uint8_t>& bytes, AutotuneDecision* decision) {
  ByteReader reader(bytes.data(), bytes.size(), "autotune decision");
  decision->settings.fusion_threshold_bytes = reader.i64();
  decision->settings.fusion_max_tensor_bytes = reader.i64();
  decision->settings.shm_chunk_bytes = reader.i64();
  decision->settings.ring_segment_bytes = reader.i64();
  decision->previous_score = reader.f64();
  decision->final = reader.u8() != 0;
  decision->best_score = reader.f64();
  if (reader.ok() && reader.remaining() != 0) {
    return Status::error(fmt::format("autotune decision: {} bytes left over after the decision",
                                     reader.remaining()));
  }
  return reader.status();
}

std::vector<std::vector<int64_t>> autotune_grids(const TunedSettings& start,
                                                 const AutotuneOptions& options) {
  std::vector<std::vector<int64_t>> grids;
  grids.push_back(with_value(powers_of_two(1 * kMiB, 64 * kMiB), start.fusion_threshold_bytes));
  std::vector<int64_t> max_tensor = powers_of_two(64 * kKiB, 4 * kMiB);
  max_tensor.push_back(0);
  grids.push_back(with_value(max_tensor, start.fusion_max_tensor_bytes, /*zero_last=*/true));
  // A chunk longer than a slot does not fit; without shared memory the
  // chunk changes nothing and is not tried.
  if (options.shm) {
    const auto longest = static_cast<int64_t>(options.shm_slot_bytes);
    grids.push_back(
        with_value(powers_of_two(64 * kKiB, std::max(longest, 64 * kKiB)), start.shm_chunk_bytes));
  } else {
    grids.push_back({start.shm_chunk_bytes});
  }
  grids.push_back(with_value(powers_of_two(128 * kKiB, 8 * kMiB), start.ring_segment_bytes));
  return grids;
}

namespace {

CoordinateSearch make_search(const TunedSettings& start, const AutotuneOptions& options) {
  std::vector<std::vector<int64_t>> grids = autotune_grids(start, options);
  const std::vector<int64_t> first = values_of(start);
  std::vector<std::size_t> indices;
  for (std::size_t k = 0; k < grids.size(); ++k) indices.push_back(index_of(grids[k], first[k]));
  // A step must gain 1 %: less is as likely noise as a better setting even
  // on a quiet machine, and not worth a move away from the configured values.
  return CoordinateSearch(std::move(grids), std::move(indices), 0.01, kMaxSearchPasses);
}

}  // namespace

Autotuner::Autotuner(const TunedSettings& start, AutotuneOptions options, bool decides)
    : options_(std::move(options)),
      decides_(decides),
      search_(make_search(start, options_)),
      trial_running_(decides),
      warmups_left_(options_.warmup_samples),
      sample_start_(Clock::now()),
      last_record_(sample_start_),
      trial_settings_(start) {
  HERD_ENFORCE_GE(options_.steps_per_sample, 1);
  if (options_.log_path.empty()) return;
  log_.open(options_.log_path, std::ios::out | std::ios::trunc);
  if (!log_) {
    log_error_ = fmt::format("cannot open the autotune log '{}'", options_.log_path);
    return;
  }
  log_ << "trial,cycle,fusion_threshold_bytes,fusion_max_tensor_bytes,shm_chunk_bytes,"
          "ring_segment_bytes,score_bytes_per_second\n";
  log_.flush();
}

TunedSettings Autotuner::settings_of(const std::vector<int64_t>& values) const {
  TunedSettings settings;
  settings.fusion_threshold_bytes = values[0];
  settings.fusion_max_tensor_bytes = values[1];
  settings.shm_chunk_bytes = values[2];
  settings.ring_segment_bytes = values[3];
  return settings;
}

void Autotuner::record(const std::vector<std::string>& names, int64_t bytes,
                       Clock::time_point now) {
  if (!decides_ || !trial_running_ || names.empty()) return;
  // A name executed steps_per_sample times already begins the next step:
  // the sample ends with the cycle before, so that it spans whole steps.
  const bool next_step = std::any_of(names.begin(), names.end(), [&](const std::string& name) {
    const auto found = executions_.find(name);
    return found != executions_.end() && found->second >= options_.steps_per_sample;
  });
  if (next_step) {
    end_sample();
    if (!trial_running_) return;
  }
  sample_bytes_ += bytes;
  for (const std::string& name : names) ++executions_[name];
  last_record_ = now;
}

void Autotuner::end_sample() {
  const double seconds = std::chrono::duration<double>(last_record_ - sample_start_).count();
  const double score = seconds > 0.0 ? static_cast<double>(sample_bytes_) / seconds : 0.0;
  sample_start_ = last_record_;
  sample_bytes_ = 0;
  executions_.clear();
  if (warmups_left_ > 0) {
    --warmups_left_;
    return;
  }
  samples_.push_back(score);
  if (static_cast<int>(samples_.size()) < kSamplesPerTrial) return;

  const double trial_score = median(samples_);
  samples_.clear();
  search_.report(trial_score);
  AutotuneDecision decision;
  decision.settings = settings_of(search_.trial());
  decision.previous_score = trial_score;
  decision.final = search_.converged();
  if (decision.final) decision.best_score = search_.best_score();
  pending_ = decision;
  trial_running_ = false;
}

AutotuneDecision Autotuner::take_decision() {
  HERD_ENFORCE(pending_.has_value());
  AutotuneDecision decision = *pending_;
  pending_.reset();
  return decision;
}

void Autotuner::applied(const AutotuneDecision& decision, uint64_t cycle, Clock::time_point now) {
  log_row(std::to_string(trial_number_), trial_cycle_, trial_settings_, decision.previous_score);
  ++trial_number_;
  trial_cycle_ = cycle;
  trial_settings_ = decision.settings;
  if (decision.final) {
    log_row("best", cycle, decision.settings, decision.best_score);
    finished_ = true;
    if (log_.is_open()) log_.close();
  }
  if (!decides_) return;
  trial_running_ = !decision.final;
  sample_start_ = now;
  last_record_ = now;
  sample_bytes_ = 0;
  executions_.clear();
}

void Autotuner::log_row(const std::string& trial, uint64_t cycle, const TunedSettings& settings,
                        double score) {
  if (!log_.is_open()) return;
  log_ << fmt::format("{},{},{},{},{},{},{:.0f}\n", trial, cycle, settings.fusion_threshold_bytes,
                      settings.fusion_max_tensor_bytes, settings.shm_chunk_bytes,
                      settings.ring_segment_bytes, score);
  log_.flush();
  if (!log_ && log_error_.empty()) {
    log_error_ = fmt::format("cannot write the autotune log '{}'", options_.log_path);
  }
}

}  // namespace herd::detail
