// CollectiveExecutor: runs one agreed response of a collective other than a
// fused allreduce (allgather, broadcast, alltoall, reducescatter, barrier,
// grouped allreduce) for this rank's entry.
//
// Called by the background thread after every rank received the same
// response, so all ranks enter the same algorithm together. Outputs whose
// size the negotiation decided (allgather, alltoall, reducescatter) are
// allocated here, into the caller's herd::Tensor, before the data moves.
// Allgathers of a set with the hierarchical group (FusionExecutor::
// hierarchical()) run the hierarchical allgather as HERD_HIERARCHICAL_ALLGATHER
// says: from kHierarchicalAllgatherMinBytes of output on under auto, always
// under 1.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/transport.h"
#include "common/status.h"
#include "src/fusion_executor.h"
#include "src/message.h"
#include "src/tensor_queue.h"

namespace herd::detail {

// Output size from which an allgather of a set with the hierarchical path
// takes collectives/hierarchical_allgather.h under HERD_HIERARCHICAL_ALLGATHER
// =auto. Across emulated hosts of 2 ranks (docs/design/
// hierarchical-allreduce.md, "Measurements (emulated hosts)") it beat the
// flat ring in every launch from 16 MiB of output up and lost in every launch
// at 4 MiB, where its three steps' barriers and latencies outweigh the bytes
// it saves on the network; 8 MiB lies between the two.
constexpr int64_t kHierarchicalAllgatherMinBytes = 8 * 1024 * 1024;

// Whether an allgather of `output_bytes` takes the hierarchical allgather on a
// set whose hierarchical path is `path`.
bool takes_hierarchical_allgather(const HierarchicalPath& path, int64_t output_bytes);

class CollectiveExecutor {
 public:
  // `allreduce` runs grouped allreduces, which share its fusion buffer; its
  // hierarchical group (if any) serves the allgathers too.
  // `global_ranks` lists the set's members (a broadcast's root is one of them).
  // `set_id`: the process set's thread in the timeline.
  CollectiveExecutor(collectives::Transport& transport, FusionExecutor& allreduce,
                     std::size_t segment_bytes, std::vector<int> global_ranks, int set_id = 0);

  // `contribution` matters to the reductions only (see FusionExecutor).
  [[nodiscard]] Status execute(const Response& response, TensorEntry& entry,
                               Contribution contribution = {});

 private:
  [[nodiscard]] Status allgather(const Response& response, TensorEntry& entry);
  [[nodiscard]] Status broadcast(const Response& response, TensorEntry& entry);
  [[nodiscard]] Status alltoall(const Response& response, TensorEntry& entry);
  [[nodiscard]] Status reducescatter(const Response& response, TensorEntry& entry);
  [[nodiscard]] Status grouped_allreduce(const Response& response, TensorEntry& entry,
                                         Contribution contribution);

  collectives::Transport& transport_;
  FusionExecutor& allreduce_;
  std::size_t segment_bytes_;
  std::vector<int> global_ranks_;
  int set_id_;
  std::vector<uint8_t> scratch_;  // reducescatter's working copy of the input
};

// Rows of `rows` that rank `rank` of `ranks` keeps after a reducescatter: the
// first rows % ranks ranks get one row more than the others.
int64_t reducescatter_rows(int64_t rows, int ranks, int rank);

// Elements in one row: the product of every extent after the first.
int64_t row_elements(const std::vector<int64_t>& shape);
// `shape` with its first extent replaced by `rows`.
std::vector<int64_t> with_rows(std::vector<int64_t> shape, int64_t rows);

// An allgather whose agreed row counts are `extents` (one per rank).
struct AllgatherPlan {
  std::vector<int64_t> bytes_per_rank;
  int64_t total_rows = 0;
};
AllgatherPlan plan_allgather(const std::vector<int64_t>& extents, int64_t row_bytes);

// One rank's side of a reducescatter of `shape` over `ranks` ranks.
struct ReducescatterPlan {
  std::vector<int64_t> counts;  // elements of each rank's part
  int64_t my_rows = 0;
  int64_t my_count = 0;  // elements
};
ReducescatterPlan plan_reducescatter(const std::vector<int64_t>& shape, int ranks, int rank);

// One rank's side of an alltoall whose agreed row counts are `extents`
// (ranks x ranks, row-major: extents[from * ranks + to]).
struct AlltoallPlan {
  std::vector<int64_t> send_bytes;     // to each rank
  std::vector<int64_t> recv_bytes;     // from each rank
  std::vector<int64_t> received_rows;  // from each rank
  int64_t total_rows = 0;              // received in all
};
AlltoallPlan plan_alltoall(const std::vector<int64_t>& extents, std::size_t ranks, std::size_t me,
                           int64_t row_bytes);

}  // namespace herd::detail
