// The straggler view (herd-timeline stragglers): for every tensor, how long
// each rank waited for the last rank to submit it.
//
// A rank's moment for one occurrence of a tensor is the begin of its
// NEGOTIATE_* span (its submission), on the common clock of merge.h. The
// k-th occurrence of a name in one process set is matched across the files,
// so the files must start at the same step: from init (HERD_TIMELINE) or at
// the same point of every rank's program. The rank submitting last is the
// straggler of that occurrence, and each rank waited the distance from its
// own moment to the straggler's.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tools/timeline/trace_files.h"

namespace herd::timeline_tool {

struct TensorStragglers {
  std::string tensor;
  int set_id = 0;
  int occurrences = 0;               // matched on every rank
  std::vector<double> mean_wait_ms;  // by position in StragglerReport::ranks
  std::vector<int> times_last;       // the same
};

struct StragglerReport {
  std::vector<int> ranks;  // the files' ranks, ascending
  int occurrences = 0;     // over every tensor
  std::vector<int> times_last;
  std::vector<double> total_wait_ms;
  // Tensors found on every rank, the one with the longest mean wait of any
  // rank first (ties by name).
  std::vector<TensorStragglers> tensors;
};

// `traces` as read_rank_traces gives them (sorted by rank).
StragglerReport find_stragglers(const std::vector<RankTrace>& traces);

// The report as text: each rank's count of occurrences where it was last and
// its total wait, the rank most often last, then the `top` tensors (all
// when 0) with each rank's mean wait.
std::string format_report(const StragglerReport& report, std::size_t top);

}  // namespace herd::timeline_tool
