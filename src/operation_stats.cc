#include "src/operation_stats.h"

#include <fmt/format.h>

namespace herd::detail {
namespace {

double seconds(OperationStats::Duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

void OperationStats::record_operation(int set_id, CollectiveType type, bool ok, int64_t bytes,
                                      Duration since_submission) {
  std::lock_guard<std::mutex> lock(mutex_);
  Counters& c = counters_[{set_id, type}];
  if (!ok) {
    ++c.failed;
    return;
  }
  ++c.count;
  c.bytes += bytes;
  c.total += since_submission;
}

void OperationStats::record_run(int set_id, CollectiveType type, Duration run_time) {
  std::lock_guard<std::mutex> lock(mutex_);
  Counters& c = counters_[{set_id, type}];
  ++c.runs;
  c.run += run_time;
}

std::vector<CollectiveStats> OperationStats::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<CollectiveStats> result;
  result.reserve(counters_.size());
  for (const auto& [key, c] : counters_) {  // std::map: by set, then by kind
    CollectiveStats s;
    s.collective = to_string(key.second);
    s.process_set = key.first;
    s.count = c.count;
    s.failed = c.failed;
    s.bytes = c.bytes;
    s.runs = c.runs;
    s.total_seconds = seconds(c.total);
    s.run_seconds = seconds(c.run);
    result.push_back(std::move(s));
  }
  return result;
}

void OperationStats::clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  counters_.clear();
}

OperationStats& process_stats() {
  static OperationStats* stats = new OperationStats;  // outlives every loop thread
  return *stats;
}

}  // namespace herd::detail

namespace herd {

std::string format_stats(int rank, const std::vector<CollectiveStats>& stats) {
  std::string text = fmt::format(
      "herd stats, rank {}: operations per process set and collective since herd::init\n", rank);
  text += fmt::format("{:>4} {:<18} {:>9} {:>7} {:>14} {:>9} {:>12} {:>12} {:>10}\n", "set",
                      "collective", "count", "failed", "bytes", "runs", "total_ms", "run_ms",
                      "mean_us");
  for (const CollectiveStats& s : stats) {
    const double mean_us = s.count > 0 ? s.total_seconds / static_cast<double>(s.count) * 1e6 : 0;
    text += fmt::format("{:>4} {:<18} {:>9} {:>7} {:>14} {:>9} {:>12.3f} {:>12.3f} {:>10.1f}\n",
                        s.process_set, s.collective, s.count, s.failed, s.bytes, s.runs,
                        s.total_seconds * 1e3, s.run_seconds * 1e3, mean_us);
  }
  return text;
}

}  // namespace herd
