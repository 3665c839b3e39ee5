// Shared helpers of the algorithm files; see transfer_util.h.
#include "collectives/transfer_util.h"

#include <cstring>

#include <fmt/format.h>

#include "common/enforce.h"

namespace herd::collectives::detail {

std::vector<Range> consecutive_ranges(const std::vector<int64_t>& counts) {
  std::vector<Range> ranges;
  ranges.reserve(counts.size());
  int64_t offset = 0;
  for (const int64_t count : counts) {
    HERD_ENFORCE_GE(count, 0);
    ranges.push_back(Range{offset, count});
    offset += count;
  }
  return ranges;
}

Status finish(PendingTransfer& transfer, const Where& where, const char* direction, int peer) {
  Status status = transfer.wait();
  if (status.is_ok()) return status;
  return status.with_context(fmt::format("{} {} step {} (rank {}, {} {}): ", where.algorithm,
                                         where.phase, where.step, where.rank, direction, peer));
}

Status finish_all(std::vector<std::unique_ptr<PendingTransfer>>& transfers, const Where& where,
                  const char* direction, int peer) {
  for (auto& transfer : transfers) {
    Status status = finish(*transfer, where, direction, peer);
    transfer.reset();
    HERD_RETURN_IF_ERROR(status);
  }
  return Status::ok();
}

void copy_block(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0 || dst == src) return;
  std::memmove(dst, src, bytes);
}

}  // namespace herd::collectives::detail
