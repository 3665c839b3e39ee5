// The per-rank timeline files of one job (docs/timeline.md), read for
// herd-timeline: each file's rank, the wall-clock time of its origin, and its
// events.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace herd::timeline_tool {

struct RankTrace {
  std::string path;
  int rank = 0;              // otherData.rank
  int64_t start_micros = 0;  // otherData.start_time_since_epoch_in_micros
  nlohmann::json events;     // traceEvents, an array
};

// Parses one file's text; throws std::runtime_error naming `path` when it is
// not JSON or lacks the header's fields (a file still being written, or not
// a herd timeline).
RankTrace parse_rank_trace(const std::string& text, const std::string& path);

// Reads and parses every file, sorted by rank; throws std::runtime_error
// naming the path of a file that cannot be read, and the two paths of a rank
// found twice.
std::vector<RankTrace> read_rank_traces(const std::vector<std::string>& paths);

// The name of each pid of `trace` (its process_name metadata), by pid.
std::vector<std::pair<int64_t, std::string>> process_names(const RankTrace& trace);

}  // namespace herd::timeline_tool
