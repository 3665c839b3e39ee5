// Every rank's timeline in one trace, on one clock (herd-timeline merge).
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "tools/timeline/trace_files.h"

namespace herd::timeline_tool {

// The merged trace: its origin is the earliest file's start, and each file's
// timestamps move by the distance of its start from that origin (the files
// give their start in wall-clock microseconds, so ranks on one machine align
// to the microsecond, ranks on several to their clocks' agreement). Rank r's
// pid p becomes r * block + p, block being one more than the largest pid of
// any file, so each rank keeps a block of its own, sorted by rank; each
// tensor's process name is prefixed by "rank r: ".
nlohmann::json merge_traces(const std::vector<RankTrace>& traces);

}  // namespace herd::timeline_tool
