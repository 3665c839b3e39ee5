// The hierarchical allreduce: shared memory inside a host, the network
// across hosts; see hierarchical_allreduce.h.
#include "collectives/hierarchical_allreduce.h"

#include <vector>

#include <fmt/format.h>

#include "collectives/chunking.h"
#include "common/enforce.h"

namespace herd::collectives {

bool hierarchical_keeps_reduction_order(int local_size) {
  return local_size >= 1 && (local_size & (local_size - 1)) == 0;
}

void hierarchical_shard(int64_t count, int local_rank, int local_size, int64_t* begin,
                        int64_t* end) {
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(local_rank, 0);
  HERD_ENFORCE_LT(local_rank, local_size);
  const Range shard = chunk_range(count, local_size, local_rank);
  *begin = shard.offset;
  *end = shard.offset + shard.count;
}

Status hierarchical_allreduce(const void* input, void* output, int64_t count,
                              std::size_t element_size, const ops::ReduceFn& reduce,
                              const HierarchicalGroup& group, const AllreduceOptions& cross_options,
                              const FinishFn& finish) {
  HERD_ENFORCE(group.local != nullptr);
  HERD_ENFORCE(group.cross != nullptr);
  HERD_ENFORCE_GE(count, 0);
  ShmAllreduceGroup& local = *group.local;
  Transport& cross = *group.cross;
  const int local_rank = local.rank();
  const int local_size = local.size();
  // "rank 1 of 2 on host 0 of 3", the context of every failure.
  const auto where = [&](const char* step) {
    return fmt::format(
        "hierarchical allreduce of {} elements, {} (local rank {} of {} on host {} "
        "of {}): ",
        count, step, local_rank, local_size, cross.rank(), cross.size());
  };

  // 1. The host's reduction of the whole buffer on every local rank; the
  // shard this rank carries across hosts is finished in step 2 only.
  HERD_RETURN_IF_ERROR(local.allreduce(input, output, count, element_size, reduce)
                           .with_context(where("step 1, the shared-memory allreduce")));

  // 2. This rank's shard across hosts. Every rank of `cross` has this local
  // rank, so the same shard: an empty one (count < local_size) is skipped
  // by all of them alike.
  int64_t begin = 0;
  int64_t end = 0;
  hierarchical_shard(count, local_rank, local_size, &begin, &end);
  if (end > begin) {
    void* shard = static_cast<uint8_t*>(output) + static_cast<std::size_t>(begin) * element_size;
    HERD_RETURN_IF_ERROR(collectives::allreduce(shard, shard, end - begin, element_size, reduce,
                                                cross, cross_options, finish)
                             .with_context(where("step 2, the allreduce across hosts")));
  }

  // 3. Every shard to every local rank.
  std::vector<std::size_t> offsets(static_cast<std::size_t>(local_size) + 1);
  for (int j = 0; j < local_size; ++j) {
    int64_t shard_begin = 0;
    int64_t shard_end = 0;
    hierarchical_shard(count, j, local_size, &shard_begin, &shard_end);
    offsets[static_cast<std::size_t>(j)] = static_cast<std::size_t>(shard_begin) * element_size;
  }
  offsets.back() = static_cast<std::size_t>(count) * element_size;
  return local.allgather_in_place(output, offsets.data())
      .with_context(where("step 3, the shared-memory allgather"));
}

}  // namespace herd::collectives
