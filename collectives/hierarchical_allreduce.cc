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
  // The step and "local rank 1 of 2 on host 0 of 3": the context of every
  // failure.
  const auto where = [&](const char* step) {
    return fmt::format(
        "hierarchical allreduce of {} elements, {} (local rank {} of {} on host {} of {}): ", count,
        step, local_rank, local_size, cross.rank(), cross.size());
  };

  // Shard j of the buffer, in bytes: local rank j's block in steps 1 and 3.
  std::vector<std::size_t> offsets(static_cast<std::size_t>(local_size) + 1);
  for (int j = 0; j < local_size; ++j) {
    int64_t shard_begin = 0;
    int64_t shard_end = 0;
    hierarchical_shard(count, j, local_size, &shard_begin, &shard_end);
    offsets[static_cast<std::size_t>(j)] = static_cast<std::size_t>(shard_begin) * element_size;
  }
  offsets.back() = static_cast<std::size_t>(count) * element_size;

  // 1. The host's reduction of this rank's shard, into its output; finished
  // in step 2 only.
  HERD_RETURN_IF_ERROR(local.reduce_scatter(input, output, element_size, reduce, offsets.data())
                           .with_context(where("step 1, the shared-memory reduce-scatter")));

  // 2. This rank's shard across hosts. Every rank of `cross` has this local
  // rank, so the same shard: an empty one (count < local_size) is skipped
  // by all of them alike.
  const std::size_t begin = offsets[static_cast<std::size_t>(local_rank)];
  const std::size_t end = offsets[static_cast<std::size_t>(local_rank) + 1];
  if (end > begin) {
    void* shard = static_cast<uint8_t*>(output) + begin;
    const auto shard_count = static_cast<int64_t>((end - begin) / element_size);
    HERD_RETURN_IF_ERROR(collectives::allreduce(shard, shard, shard_count, element_size, reduce,
                                                cross, cross_options, finish)
                             .with_context(where("step 2, the allreduce across hosts")));
  }

  // 3. Every shard to every local rank.
  return local.allgather_in_place(output, offsets.data())
      .with_context(where("step 3, the shared-memory allgather"));
}

}  // namespace herd::collectives
