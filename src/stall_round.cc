// Rank 0's judgement of a stall round and the round's messages (stall_round.h).
//
// Wire format, little-endian (common/byte_codec.h):
//   pending := kind:u8='P' count:u32 (name type:u8 waited_ms:i64 flags:u8)*count
//              flags: bit 0 warning_due, bit 1 shutdown_due
//   verdict := kind:u8='V' action:u8 text count:u32 name*count
//   name, text := length:u32 bytes
#include "src/stall_round.h"

#include <algorithm>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "common/byte_codec.h"

namespace herd::detail {
namespace {

constexpr uint8_t kPendingKind = 'P';
constexpr uint8_t kVerdictKind = 'V';
constexpr uint8_t kWarningDueFlag = 1U << 0;
constexpr uint8_t kShutdownDueFlag = 1U << 1;
// Smallest encoded entries, to reject an impossible count before allocating.
constexpr std::size_t kMinPendingBytes = 4 + 1 + 8 + 1;
constexpr std::size_t kMinNameBytes = 4;

// One name as every rank holding it reported it.
struct NameState {
  CollectiveType type = CollectiveType::kAllreduce;  // from the lowest rank holding it
  int64_t waited_ms = 0;                             // the longest wait
  std::vector<int> holders;                          // set ranks, ascending
  bool warning_due = false;
  bool shutdown_due = false;
};

std::string rank_list(const std::vector<int>& set_ranks, const std::vector<int>& labels) {
  std::vector<int> named;
  for (int rank : set_ranks) named.push_back(labels[static_cast<std::size_t>(rank)]);
  return fmt::format("[{}]", fmt::join(named, ", "));
}

// The clauses of `names` (all missing somewhere), by missing rank.
std::string describe(const std::map<std::string, NameState>& table,
                     const std::vector<std::string>& names, int num_ranks,
                     const std::vector<bool>& is_joined, const std::vector<int>& labels) {
  std::vector<std::string> clauses;
  for (int rank = 0; rank < num_ranks; ++rank) {
    if (is_joined[static_cast<std::size_t>(rank)]) continue;
    std::vector<std::string> items;
    std::size_t more = 0;
    for (const std::string& name : names) {
      const NameState& state = table.at(name);
      if (std::binary_search(state.holders.begin(), state.holders.end(), rank)) continue;
      if (items.size() == kStallNamesPerRank) {
        ++more;
        continue;
      }
      items.push_back(fmt::format("{} '{}' (ranks {} have waited {:.1f} s)", to_string(state.type),
                                  name, rank_list(state.holders, labels),
                                  static_cast<double>(state.waited_ms) / 1000.0));
    }
    if (items.empty()) continue;
    if (more > 0) items.push_back(fmt::format("and {} more", more));
    clauses.push_back(fmt::format("rank {} has not submitted {}",
                                  labels[static_cast<std::size_t>(rank)], fmt::join(items, ", ")));
  }
  return fmt::format("{}", fmt::join(clauses, "; "));
}

}  // namespace

StallVerdict judge_stalls(const std::vector<std::vector<PendingTensor>>& by_rank,
                          const std::vector<int>& joined, const std::vector<int>& labels) {
  const int num_ranks = static_cast<int>(by_rank.size());
  std::vector<bool> is_joined(by_rank.size(), false);
  for (int rank : joined) is_joined.at(static_cast<std::size_t>(rank)) = true;
  int present_ranks = 0;
  for (int rank = 0; rank < num_ranks; ++rank) present_ranks += is_joined[rank] ? 0 : 1;

  std::map<std::string, NameState> table;  // by name: the order of the text
  for (int rank = 0; rank < num_ranks; ++rank) {
    for (const PendingTensor& tensor : by_rank[static_cast<std::size_t>(rank)]) {
      NameState& state = table[tensor.name];
      if (state.holders.empty()) state.type = tensor.type;
      state.holders.push_back(rank);
      state.waited_ms = std::max(state.waited_ms, tensor.waited_ms);
      state.warning_due = state.warning_due || tensor.warning_due;
      state.shutdown_due = state.shutdown_due || tensor.shutdown_due;
    }
  }

  std::vector<std::string> missing;  // names some rank that has not joined lacks
  std::vector<std::string> warn;
  bool shut_down = false;
  for (const auto& [name, state] : table) {
    int holders_present = 0;
    for (int rank : state.holders) holders_present += is_joined[rank] ? 0 : 1;
    if (holders_present == present_ranks) continue;
    missing.push_back(name);
    if (state.warning_due) warn.push_back(name);
    shut_down = shut_down || state.shutdown_due;
  }

  StallVerdict verdict;
  if (shut_down) {
    verdict.action = StallAction::kShutdown;
    verdict.text =
        "herd stopped: tensors waited longer than HERD_STALL_SHUTDOWN_TIME for ranks that did not "
        "submit them: " +
        describe(table, missing, num_ranks, is_joined, labels);
    verdict.names = std::move(missing);
  } else if (!warn.empty()) {
    verdict.action = StallAction::kWarn;
    verdict.text = "stall: " + describe(table, warn, num_ranks, is_joined, labels) +
                   "; a rank that never submits a tensor stalls every rank waiting for it";
    verdict.names = std::move(warn);
  }
  return verdict;
}

std::vector<uint8_t> encode(const std::vector<PendingTensor>& pending) {
  ByteWriter out;
  out.u8(kPendingKind);
  out.u32(static_cast<uint32_t>(pending.size()));
  for (const PendingTensor& tensor : pending) {
    out.string(tensor.name);
    out.u8(static_cast<uint8_t>(tensor.type));
    out.i64(tensor.waited_ms);
    out.u8(static_cast<uint8_t>((tensor.warning_due ? kWarningDueFlag : 0) |
                                (tensor.shutdown_due ? kShutdownDueFlag : 0)));
  }
  return out.take();
}

Status decode(const std::vector<uint8_t>& bytes, std::vector<PendingTensor>* pending) {
  ByteReader in(bytes.data(), bytes.size(), "pending tensor list");
  const uint8_t kind = in.u8();
  if (in.ok() && kind != kPendingKind)
    in.fail(fmt::format("corrupt {}: kind byte {}", in.what(), kind));
  const uint32_t count = in.u32();
  if (in.ok() && count > in.remaining() / kMinPendingBytes) {
    in.fail(fmt::format("truncated {}: {} entries announced, {} bytes left", in.what(), count,
                        in.remaining()));
  }
  pending->clear();
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    PendingTensor tensor;
    tensor.name = in.string();
    const uint8_t type = in.u8();
    if (in.ok() && type > static_cast<uint8_t>(kLastCollectiveType)) {
      in.fail(fmt::format("corrupt {}: collective {} out of range", in.what(), type));
    }
    tensor.type = static_cast<CollectiveType>(type);
    tensor.waited_ms = in.i64();
    const uint8_t flags = in.u8();
    tensor.warning_due = (flags & kWarningDueFlag) != 0;
    tensor.shutdown_due = (flags & kShutdownDueFlag) != 0;
    pending->push_back(std::move(tensor));
  }
  if (in.ok() && in.remaining() != 0) {
    in.fail(fmt::format("corrupt {}: {} trailing bytes", in.what(), in.remaining()));
  }
  return in.status();
}

std::vector<uint8_t> encode(const StallVerdict& verdict) {
  ByteWriter out;
  out.u8(kVerdictKind);
  out.u8(static_cast<uint8_t>(verdict.action));
  out.string(verdict.text);
  out.u32(static_cast<uint32_t>(verdict.names.size()));
  for (const std::string& name : verdict.names) out.string(name);
  return out.take();
}

Status decode(const std::vector<uint8_t>& bytes, StallVerdict* verdict) {
  ByteReader in(bytes.data(), bytes.size(), "stall verdict");
  const uint8_t kind = in.u8();
  if (in.ok() && kind != kVerdictKind)
    in.fail(fmt::format("corrupt {}: kind byte {}", in.what(), kind));
  const uint8_t action = in.u8();
  if (in.ok() && action > static_cast<uint8_t>(StallAction::kShutdown)) {
    in.fail(fmt::format("corrupt {}: action {} out of range", in.what(), action));
  }
  verdict->action = static_cast<StallAction>(action);
  verdict->text = in.string();
  const uint32_t count = in.u32();
  if (in.ok() && count > in.remaining() / kMinNameBytes) {
    in.fail(fmt::format("truncated {}: {} names announced, {} bytes left", in.what(), count,
                        in.remaining()));
  }
  verdict->names.clear();
  for (uint32_t i = 0; i < count && in.ok(); ++i) verdict->names.push_back(in.string());
  if (in.ok() && in.remaining() != 0) {
    in.fail(fmt::format("corrupt {}: {} trailing bytes", in.what(), in.remaining()));
  }
  return in.status();
}

}  // namespace herd::detail
