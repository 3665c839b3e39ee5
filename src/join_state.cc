#include "src/join_state.h"

#include <algorithm>

#include <fmt/format.h>

#include "ops/reduce.h"

namespace herd::detail {
namespace {

bool runs_while_joined(CollectiveType type) {
  return type == CollectiveType::kAllreduce || type == CollectiveType::kGroupedAllreduce;
}

}  // namespace

JoinState::JoinState(int set_rank, std::vector<int> global_ranks)
    : set_rank_(set_rank), global_ranks_(std::move(global_ranks)) {}

bool JoinState::request(const std::shared_ptr<HandleState>& handle, int* last_rank) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!handle_) {
      handle_ = handle;
      last_rank_ = last_rank;
      requested_.store(true);
      return true;
    }
  }
  handle->complete(Status::error("join: this rank is already waiting in herd::join"));
  return false;
}

bool JoinState::begin_cycle() {
  joined_this_cycle_ = requested_.load();
  return joined_this_cycle_;
}

JoinState::Progress JoinState::agree(const std::vector<int>& joined_ranks) {
  if (joined_ranks.size() != global_ranks_.size()) {
    if (joined_ranks == joined_ranks_) return Progress::kUnchanged;
    joined_ranks_ = joined_ranks;
    return Progress::kChanged;
  }
  int last = joined_ranks.back();
  for (int rank : joined_ranks) {
    if (!std::binary_search(joined_ranks_.begin(), joined_ranks_.end(), rank)) last = rank;
  }
  joined_ranks_.clear();
  std::shared_ptr<HandleState> handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = std::move(handle_);
    if (last_rank_ != nullptr) *last_rank_ = global_ranks_[static_cast<std::size_t>(last)];
    last_rank_ = nullptr;
    requested_.store(false);
  }
  if (handle) handle->complete(Status::ok());
  return Progress::kAllJoined;
}

std::vector<uint32_t> JoinState::joinable_slots(const ResponseCache& cache) const {
  std::vector<uint32_t> slots;
  for (uint32_t slot = 0; slot < cache.slot_bound(); ++slot) {
    if (cache.occupied(slot) && runs_while_joined(cache.response(slot).collective)) {
      slots.push_back(slot);
    }
  }
  return slots;
}

Status JoinState::check_runs_while_joined(const TensorEntry& entry) const {
  if (joined_ranks_.empty() || runs_while_joined(entry.request.type)) return Status::ok();
  std::vector<int> joined;
  for (int rank : joined_ranks_) joined.push_back(global_ranks_[static_cast<std::size_t>(rank)]);
  return Status::error(fmt::format(
      "{}: ranks [{}] have joined (herd::join); only allreduce and grouped allreduce run while "
      "ranks are joined",
      entry.handle->description(), fmt::join(joined, ", ")));
}

TensorEntry JoinState::stand_in_entry(const Response& response) const {
  TensorEntry entry;
  entry.request.rank = set_rank_;
  entry.request.type = response.collective;
  entry.request.name = response.name;
  entry.request.dtype = response.dtype;
  entry.request.op = response.op;
  entry.request.shape = response.shape;
  entry.request.group_shapes = response.group_shapes;
  const int64_t count = response.num_elements();
  entry.owned_storage.reset(new uint8_t[std::max<std::size_t>(response.num_bytes(), 1)]);
  ops::fill_identity(entry.owned_storage.get(), count, response.dtype, response.op);
  entry.input = TensorView{entry.owned_storage.get(), response.dtype, response.shape};
  entry.output = entry.input;
  std::size_t offset = 0;
  for (const std::vector<int64_t>& shape : response.group_shapes) {
    TensorView member{entry.owned_storage.get() + offset, response.dtype, shape};
    entry.group_inputs.push_back(member);
    entry.group_outputs.push_back(member);
    offset += member.num_bytes();
  }
  return entry;
}

void JoinState::fail(const std::string& reason) {
  std::shared_ptr<HandleState> handle;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    handle = std::move(handle_);
    last_rank_ = nullptr;
  }
  if (handle) handle->complete(Status::error("join: " + reason));
}

}  // namespace herd::detail
