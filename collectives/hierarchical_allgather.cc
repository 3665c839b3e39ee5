// The hierarchical allgather; see hierarchical_allgather.h.
#include "collectives/hierarchical_allgather.h"

#include <cstring>

#include <fmt/format.h>

#include "collectives/chunking.h"
#include "collectives/ring_phases.h"
#include "collectives/tags.h"
#include "common/enforce.h"

namespace herd::collectives {

Status hierarchical_allgatherv(const void* input, void* output,
                               const std::vector<int64_t>& bytes_per_rank,
                               const HierarchicalGroup& group, std::size_t segment_bytes) {
  HERD_ENFORCE(group.local != nullptr);
  HERD_ENFORCE(group.cross != nullptr);
  ShmAllreduceGroup& local = *group.local;
  Transport& cross = *group.cross;
  const int local_size = local.size();
  const int local_rank = local.rank();
  const int hosts = cross.size();
  const int host = cross.rank();
  HERD_ENFORCE_EQ(bytes_per_rank.size(), static_cast<std::size_t>(hosts * local_size));
  const auto where = [&](const char* step) {
    return fmt::format("hierarchical allgather, {} (local rank {} of {} on host {} of {}): ", step,
                       local_rank, local_size, host, hosts);
  };
  // offsets[r]: where set rank r's block starts; offsets[p]: the end.
  std::vector<std::size_t> offsets{0};
  for (const int64_t bytes : bytes_per_rank) {
    HERD_ENFORCE_GE(bytes, 0);
    offsets.push_back(offsets.back() + static_cast<std::size_t>(bytes));
  }
  const auto region_begin = [&](int h) {
    return offsets[static_cast<std::size_t>(h * local_size)];
  };
  const auto region_bytes = [&](int h) { return region_begin(h + 1) - region_begin(h); };
  // Bytes [*begin, *end) of host h's region: slice i, relative to the region.
  const auto slice = [&](int h, int i, std::size_t* begin, std::size_t* end) {
    int64_t first = 0;
    int64_t last = 0;
    hierarchical_shard(static_cast<int64_t>(region_bytes(h)), i, local_size, &first, &last);
    *begin = static_cast<std::size_t>(first);
    *end = static_cast<std::size_t>(last);
  };
  auto* out = static_cast<uint8_t*>(output);

  // 1. This host's region on every local rank.
  const std::size_t me = static_cast<std::size_t>(host * local_size + local_rank);
  if (input != out + offsets[me] && offsets[me + 1] > offsets[me]) {
    std::memcpy(out + offsets[me], input, offsets[me + 1] - offsets[me]);
  }
  HERD_RETURN_IF_ERROR(
      local
          .allgather_in_place(output,
                              offsets.data() + static_cast<std::ptrdiff_t>(host * local_size))
          .with_context(where("step 1, the shared-memory allgather of the host's blocks")));
  if (hosts == 1) return Status::ok();

  // 2. Slice local_rank of every host's region, where it lies in the
  // output: the ring's allgather phase over H blocks that need not touch.
  std::vector<Range> slices;
  for (int h = 0; h < hosts; ++h) {
    std::size_t begin = 0;
    std::size_t end = 0;
    slice(h, local_rank, &begin, &end);
    slices.push_back(
        Range{static_cast<int64_t>(region_begin(h) + begin), static_cast<int64_t>(end - begin)});
  }
  const detail::RingPhase phase{"hierarchical allgather", detail::kRingAllgathervTag,
                                detail::segment_count_for(segment_bytes, 1)};
  HERD_RETURN_IF_ERROR(detail::ring_allgather_phase(output, slices, 1, cross, phase)
                           .with_context(where("step 2, the allgather across hosts")));

  // 3. Every other host's region, local rank i holding its slice i.
  std::vector<std::size_t> slice_offsets(static_cast<std::size_t>(local_size) + 1);
  for (int h = 0; h < hosts; ++h) {
    if (h == host) continue;
    for (int i = 0; i < local_size; ++i) {
      std::size_t begin = 0;
      std::size_t end = 0;
      slice(h, i, &begin, &end);
      slice_offsets[static_cast<std::size_t>(i)] = region_begin(h) + begin;
    }
    slice_offsets.back() = region_begin(h + 1);
    HERD_RETURN_IF_ERROR(local.allgather_in_place(output, slice_offsets.data())
                             .with_context(where("step 3, the shared-memory allgather of a "
                                                 "remote host's region")));
  }
  return Status::ok();
}

}  // namespace herd::collectives
