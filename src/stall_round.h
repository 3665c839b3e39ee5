// The stall round: what a process set does when some rank has a tensor that
// has waited past HERD_STALL_CHECK_TIME or HERD_STALL_SHUTDOWN_TIME.
//
// A tensor that some ranks submitted and another has not is not an error
// herd can decide alone (the late rank may still come). So the ranks agree on
// it: the cycle's agreement carries one bit, "a stall check is due here"
// (cycle_bits.h); when some rank sets it, every rank gathers its pending
// tensors, with their wait times, to the set's rank 0, which judges them
// (judge_stalls) and broadcasts one StallVerdict: nothing, a warning, or a
// shutdown, each with the same text for every rank. Rank 0 sees every rank's
// pending names, those settled through the response cache too, so the
// verdict names, per rank that lacks a tensor, what it lacks.
//
// Pure functions, tested without MPI; the background loop runs the round.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "src/message.h"

namespace herd::detail {

// One tensor pending on a rank, as that rank reports it to rank 0.
struct PendingTensor {
  std::string name;
  CollectiveType type = CollectiveType::kAllreduce;
  int64_t waited_ms = 0;  // since its submission on this rank
  // It has waited past this rank's HERD_STALL_CHECK_TIME and no warning has
  // named it yet.
  bool warning_due = false;
  // It has waited past this rank's HERD_STALL_SHUTDOWN_TIME.
  bool shutdown_due = false;
};

enum class StallAction : uint8_t {
  kNone,      // nothing is missing anywhere (the names complete on their own)
  kWarn,      // every rank logs `text` as a warning
  kShutdown,  // every rank stops the set, failing what is pending with `text`
};

struct StallVerdict {
  StallAction action = StallAction::kNone;
  std::string text;
  // The names `text` covers: no later warning names them again.
  std::vector<std::string> names;
};

// How many tensors a verdict lists per missing rank before "and N more".
constexpr std::size_t kStallNamesPerRank = 10;

// Rank 0's judgement over every rank's pending tensors (index = set rank).
// A name is missing on the ranks that do not hold it and have not joined
// (herd::join; `joined` holds set ranks); its wait is the longest among the
// ranks holding it. Ranks are named by `labels` (global ranks).
//   kShutdown, when a missing name is shutdown_due on some rank: every
//     missing name, by missing rank;
//   kWarn, else when a missing name is warning_due on some rank: those names;
//   kNone otherwise.
// The text, by missing rank (ascending), names by name:
//   "rank 1 has not submitted allreduce 'grad/fc1' (ranks [0, 2] have waited
//    61.0 s), allreduce 'grad/fc2' (ranks [0] have waited 60.2 s); rank 3 ..."
// preceded, for a warning, by "stall: " and followed by "; a rank that never
// submits a tensor stalls every rank waiting for it", and preceded, for a
// shutdown, by "herd stopped: tensors waited longer than
// HERD_STALL_SHUTDOWN_TIME for ranks that did not submit them: ".
StallVerdict judge_stalls(const std::vector<std::vector<PendingTensor>>& by_rank,
                          const std::vector<int>& joined, const std::vector<int>& labels);

// Byte encodings for the control channel; decoding checks every length.
std::vector<uint8_t> encode(const std::vector<PendingTensor>& pending);
[[nodiscard]] Status decode(const std::vector<uint8_t>& bytes, std::vector<PendingTensor>* pending);
std::vector<uint8_t> encode(const StallVerdict& verdict);
[[nodiscard]] Status decode(const std::vector<uint8_t>& bytes, StallVerdict* verdict);

}  // namespace herd::detail
