#include "src/collective_executor.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "collectives/allgather.h"
#include "collectives/alltoall.h"
#include "collectives/broadcast.h"
#include "collectives/chunking.h"
#include "collectives/hierarchical_allgather.h"
#include "collectives/reducescatter.h"
#include "common/enforce.h"
#include "ops/reduce.h"
#include "src/timeline.h"

namespace herd::detail {

int64_t row_elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (std::size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

std::vector<int64_t> with_rows(std::vector<int64_t> shape, int64_t rows) {
  shape[0] = rows;
  return shape;
}

AllgatherPlan plan_allgather(const std::vector<int64_t>& extents, int64_t row_bytes) {
  AllgatherPlan plan;
  for (int64_t rows : extents) {
    plan.bytes_per_rank.push_back(rows * row_bytes);
    plan.total_rows += rows;
  }
  return plan;
}

ReducescatterPlan plan_reducescatter(const std::vector<int64_t>& shape, int ranks, int rank) {
  ReducescatterPlan plan;
  const int64_t per_row = row_elements(shape);
  for (int r = 0; r < ranks; ++r)
    plan.counts.push_back(reducescatter_rows(shape[0], ranks, r) * per_row);
  plan.my_rows = reducescatter_rows(shape[0], ranks, rank);
  plan.my_count = plan.my_rows * per_row;
  return plan;
}

AlltoallPlan plan_alltoall(const std::vector<int64_t>& extents, std::size_t ranks, std::size_t me,
                           int64_t row_bytes) {
  AlltoallPlan plan;
  plan.send_bytes.resize(ranks);
  plan.recv_bytes.resize(ranks);
  plan.received_rows.resize(ranks);
  for (std::size_t peer = 0; peer < ranks; ++peer) {
    plan.send_bytes[peer] = extents[me * ranks + peer] * row_bytes;
    plan.received_rows[peer] = extents[peer * ranks + me];
    plan.recv_bytes[peer] = plan.received_rows[peer] * row_bytes;
    plan.total_rows += plan.received_rows[peer];
  }
  return plan;
}

int64_t reducescatter_rows(int64_t rows, int ranks, int rank) {
  return collectives::chunk_range(rows, ranks, rank).count;
}

bool takes_hierarchical_allgather(const HierarchicalPath& path, int64_t output_bytes) {
  // An empty output has nothing to move: the ring passes it in no time.
  if (path.group.local == nullptr || output_bytes == 0) return false;
  switch (path.allgather) {
    case HierarchicalAllgather::kOff: return false;
    case HierarchicalAllgather::kOn: return true;
    case HierarchicalAllgather::kAuto: return output_bytes >= kHierarchicalAllgatherMinBytes;
  }
  return false;
}

CollectiveExecutor::CollectiveExecutor(collectives::Transport& transport, FusionExecutor& allreduce,
                                       std::size_t segment_bytes, std::vector<int> global_ranks,
                                       int set_id)
    : transport_(transport),
      allreduce_(allreduce),
      segment_bytes_(segment_bytes),
      global_ranks_(std::move(global_ranks)),
      set_id_(set_id) {}

Status CollectiveExecutor::execute(const Response& response, TensorEntry& entry,
                                   Contribution contribution) {
  switch (response.collective) {
    case CollectiveType::kAllgather: return allgather(response, entry);
    case CollectiveType::kBroadcast: return broadcast(response, entry);
    case CollectiveType::kAlltoall: return alltoall(response, entry);
    case CollectiveType::kReducescatter: return reducescatter(response, entry);
    case CollectiveType::kGroupedAllreduce: return grouped_allreduce(response, entry, contribution);
    case CollectiveType::kBarrier:
      // Agreement itself is the barrier: a response exists only once every
      // rank has submitted.
      return Status::ok();
    case CollectiveType::kAllreduce: {
      std::vector<TensorEntry*> one{&entry};
      return allreduce_.allreduce(response, one, contribution);
    }
  }
  HERD_ENFORCE(false && "unknown collective");
}

Status CollectiveExecutor::allgather(const Response& response, TensorEntry& entry) {
  const int ranks = transport_.size();
  HERD_ENFORCE_EQ(response.rank_extents.size(), static_cast<std::size_t>(ranks));
  const int64_t row_bytes =
      row_elements(entry.request.shape) * static_cast<int64_t>(element_size(response.dtype));
  const AllgatherPlan plan = plan_allgather(response.rank_extents, row_bytes);
  entry.output_tensor->reset(response.dtype, with_rows(entry.request.shape, plan.total_rows));
  const HierarchicalPath& hierarchical = allreduce_.hierarchical();
  if (takes_hierarchical_allgather(hierarchical, plan.total_rows * row_bytes)) {
    TimelineActivity activity(entry, set_id_, "HIERARCHICAL_ALLGATHER");
    return collectives::hierarchical_allgatherv(entry.input.data, entry.output_tensor->data(),
                                                plan.bytes_per_rank, hierarchical.group,
                                                segment_bytes_);
  }
  TimelineActivity activity(entry, set_id_, "RING_ALLGATHER");
  return collectives::ring_allgatherv(entry.input.data, entry.output_tensor->data(),
                                      plan.bytes_per_rank, transport_, segment_bytes_);
}

Status CollectiveExecutor::broadcast(const Response& response, TensorEntry& entry) {
  const auto root = std::find(global_ranks_.begin(), global_ranks_.end(), response.root);
  HERD_ENFORCE(root != global_ranks_.end());
  TimelineActivity activity(entry, set_id_, "TREE_BROADCAST");
  return collectives::broadcast(entry.input.data, entry.input.num_bytes(),
                                static_cast<int>(root - global_ranks_.begin()), transport_);
}

Status CollectiveExecutor::alltoall(const Response& response, TensorEntry& entry) {
  const auto ranks = static_cast<std::size_t>(transport_.size());
  const auto me = static_cast<std::size_t>(transport_.rank());
  HERD_ENFORCE_EQ(response.rank_extents.size(), ranks * ranks);
  const int64_t row_bytes =
      row_elements(entry.request.shape) * static_cast<int64_t>(element_size(response.dtype));
  AlltoallPlan plan = plan_alltoall(response.rank_extents, ranks, me, row_bytes);
  entry.output_tensor->reset(response.dtype, with_rows(entry.request.shape, plan.total_rows));
  {
    TimelineActivity activity(entry, set_id_, "PAIRWISE_ALLTOALL");
    HERD_RETURN_IF_ERROR(collectives::pairwise_alltoallv(entry.input.data, plan.send_bytes,
                                                         entry.output_tensor->data(),
                                                         plan.recv_bytes, transport_));
  }
  if (entry.received_splits != nullptr) *entry.received_splits = std::move(plan.received_rows);
  return Status::ok();
}

Status CollectiveExecutor::reducescatter(const Response& response, TensorEntry& entry) {
  const int ranks = transport_.size();
  const ReducescatterPlan plan = plan_reducescatter(entry.request.shape, ranks, transport_.rank());
  entry.output_tensor->reset(response.dtype, with_rows(entry.request.shape, plan.my_rows));

  // The algorithm reduces in its input buffer, which is the caller's and
  // must stay unchanged: work on a copy.
  const std::size_t bytes = entry.input.num_bytes();
  if (scratch_.size() < bytes) scratch_.resize(bytes);
  if (bytes > 0) std::memcpy(scratch_.data(), entry.input.data, bytes);
  const int64_t count = entry.input.num_elements();
  ops::scale(scratch_.data(), count, response.dtype, response.prescale);
  const ReduceOp op = response.op == ReduceOp::kAverage ? ReduceOp::kSum : response.op;
  {
    TimelineActivity activity(entry, set_id_, "RING_REDUCESCATTER");
    HERD_RETURN_IF_ERROR(collectives::ring_reducescatter(
        scratch_.data(), entry.output_tensor->data(), plan.counts, element_size(response.dtype),
        ops::make_reduce_fn(response.dtype, op), transport_, segment_bytes_));
  }
  if (response.op == ReduceOp::kAverage) {
    ops::average(entry.output_tensor->data(), plan.my_count, response.dtype, ranks,
                 response.postscale);
  } else {
    ops::scale(entry.output_tensor->data(), plan.my_count, response.dtype, response.postscale);
  }
  return Status::ok();
}

Status CollectiveExecutor::grouped_allreduce(const Response& response, TensorEntry& entry,
                                             Contribution contribution) {
  // One fused reduction over every member: the group was agreed as one unit,
  // so it runs as one, whatever the fusion threshold.
  std::vector<TensorEntry> members(entry.group_inputs.size());
  std::vector<TensorEntry*> pointers;
  for (std::size_t i = 0; i < members.size(); ++i) {
    members[i].request.shape = response.group_shapes[i];
    members[i].input = entry.group_inputs[i];
    members[i].output = entry.group_outputs[i];
    pointers.push_back(&members[i]);
  }
  if (pointers.empty()) return Status::ok();
  // The group's copies and algorithm go on its own track, once.
  if (entry.handle) members.front().timeline_track = &entry.request.name;
  Response spec = response;
  spec.collective = CollectiveType::kAllreduce;
  return allreduce_.allreduce(spec, pointers, contribution);
}

}  // namespace herd::detail
