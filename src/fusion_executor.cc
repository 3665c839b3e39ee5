#include "src/fusion_executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>

#include <fmt/format.h>

#include "collectives/adasum.h"
#include "ops/reduce.h"
#include "src/timeline.h"
#include "src/transport_fit.h"

namespace herd::detail {

collectives::AllreduceOptions allreduce_options(const Config& config) {
  collectives::AllreduceOptions options;
  options.segment_bytes = ring_segment_bytes(config);
  options.small_message_threshold_bytes = config.small_allreduce_bytes;
  return options;
}

FusionExecutor::FusionExecutor(collectives::Transport& transport,
                               collectives::AllreduceOptions options, ShmPath shm, int set_id,
                               AllreduceAlgorithmSetting algorithm, HierarchicalPath hierarchical)
    : transport_(transport),
      options_(options),
      shm_(shm),
      hierarchical_(hierarchical),
      set_id_(set_id),
      algorithm_(algorithm) {}

collectives::ShmAllreduceGroup* FusionExecutor::shm_group() const {
  return shm_.group != nullptr ? shm_.group : hierarchical_.group.local;
}

void FusionExecutor::set_shm_chunk_bytes(std::size_t bytes) {
  if (shm_group() != nullptr) shm_group()->set_short_chunk_bytes(bytes);
}

std::size_t FusionExecutor::shm_chunk_bytes() const {
  return shm_group() != nullptr ? shm_group()->short_chunk_bytes()
                                : collectives::kShmShortChunkBytes;
}

AllreducePath FusionExecutor::flat_by_threshold(std::size_t bytes) const {
  return collectives::choose_allreduce_algorithm(bytes, transport_.size(), options_) ==
                 collectives::AllreduceAlgorithm::kRing
             ? AllreducePath::kRing
             : AllreducePath::kRecursiveDoubling;
}

AllreducePath FusionExecutor::first_candidate(std::size_t bytes) const {
  if (shm_.group != nullptr && bytes <= shm_.max_bytes) return AllreducePath::kShm;
  if (has_hierarchical() && bytes >= hierarchical_.min_bytes) {
    return AllreducePath::kHierarchical;
  }
  // On one rank every path is a copy: the transport's, which needs no group.
  if (transport_.size() == 1) return AllreducePath::kRing;
  return flat_by_threshold(bytes);
}

std::vector<AllreducePath> FusionExecutor::candidates(std::size_t bytes) const {
  const AllreducePath first = first_candidate(bytes);
  if (transport_.size() == 1) return {first};
  const AllreducePath flat_first = flat_by_threshold(bytes);
  const AllreducePath flat_second =
      flat_first == AllreducePath::kRing ? AllreducePath::kRecursiveDoubling : AllreducePath::kRing;
  std::vector<AllreducePath> paths;
  if (first == AllreducePath::kShm || first == AllreducePath::kHierarchical) paths.push_back(first);
  paths.push_back(flat_first);
  // Below its size the hierarchical allreduce is still measured, after the
  // flat algorithm the threshold picks.
  if (has_hierarchical() && first != AllreducePath::kHierarchical) {
    paths.push_back(AllreducePath::kHierarchical);
  }
  paths.push_back(flat_second);
  return paths;
}

AllreduceChooser::Choice FusionExecutor::choose(std::size_t bytes) {
  if (hierarchical_forced()) return {AllreducePath::kHierarchical};
  // Only the measured choice needs the candidates' list: a fixed algorithm,
  // the default, costs no allocation per call.
  switch (algorithm_) {
    case AllreduceAlgorithmSetting::kAuto: return chooser_.choose(bytes, candidates(bytes));
    case AllreduceAlgorithmSetting::kShm: return {first_candidate(bytes)};
    case AllreduceAlgorithmSetting::kRing: return {AllreducePath::kRing};
    case AllreduceAlgorithmSetting::kRecursiveDoubling:
      return {transport_.size() == 1 ? AllreducePath::kRing : AllreducePath::kRecursiveDoubling};
  }
  return {first_candidate(bytes)};
}

Status FusionExecutor::run(AllreducePath path, const void* input, void* output, int64_t count,
                           std::size_t element_size, const ops::ReduceFn& reduce,
                           const collectives::FinishFn& finish, std::size_t later_bytes) {
  switch (path) {
    case AllreducePath::kShm:
      return shm_.group->allreduce(input, output, count, element_size, reduce, finish, later_bytes);
    case AllreducePath::kHierarchical:
      return collectives::hierarchical_allreduce(input, output, count, element_size, reduce,
                                                 hierarchical_.group, options_, finish);
    case AllreducePath::kRing:
    case AllreducePath::kRecursiveDoubling: break;
  }
  return collectives::allreduce_with(
      path == AllreducePath::kRing ? collectives::AllreduceAlgorithm::kRing
                                   : collectives::AllreduceAlgorithm::kRecursiveDoubling,
      input, output, count, element_size, reduce, transport_, options_, finish);
}

Status FusionExecutor::warm_up() {
  warmed_up_ = true;
  if (algorithm_ != AllreduceAlgorithmSetting::kAuto || hierarchical_forced() ||
      transport_.size() == 1) {
    return Status::ok();
  }
  // The first runs of each algorithm in a process pay once for what later
  // runs find ready (MPI's first messages between the ranks on the data
  // communicator, the first touch of the shared control lines and of both
  // slots, which calls use in turn): tens of microseconds, which would decide
  // the first measurements of small sizes.
  constexpr int64_t kCount = 8;
  constexpr int kRuns = 2;
  std::array<double, kCount> values{};
  const ops::ReduceFn sum = ops::make_reduce_fn(DataType::kFloat64, ReduceOp::kSum);
  std::vector<AllreducePath> paths;
  for (AllreducePath path : candidates(sizeof(values))) paths.insert(paths.end(), kRuns, path);
  for (AllreducePath path : paths) {
    HERD_RETURN_IF_ERROR(run(path, values.data(), values.data(), kCount, sizeof(double), sum, {}, 0)
                             .with_context(fmt::format("warming up the allreduce algorithms ({}): ",
                                                       activity_name(path))));
  }
  return Status::ok();
}

Status FusionExecutor::agree(std::size_t bytes) {
  std::array<double, kAllreducePaths> estimates = chooser_.estimates(bytes);
  HERD_RETURN_IF_ERROR(
      collectives::recursive_doubling_allreduce(
          estimates.data(), static_cast<int64_t>(estimates.size()), sizeof(double),
          ops::make_reduce_fn(DataType::kFloat64, ReduceOp::kMin), transport_)
          .with_context(fmt::format("agreeing on the allreduce algorithm for {} bytes: ", bytes)));
  chooser_.agree(bytes, estimates);
  return Status::ok();
}

uint8_t* FusionExecutor::fusion_buffer(std::size_t bytes) {
  if (bytes > fusion_buffer_capacity_) {
    // No value-initialization: every byte used is packed before it is read.
    fusion_buffer_.reset(new uint8_t[bytes]);
    fusion_buffer_capacity_ = bytes;
  }
  return fusion_buffer_.get();
}

Status FusionExecutor::allreduce(const Response& spec, const std::vector<TensorEntry*>& entries,
                                 Contribution contribution, std::size_t later_bytes) {
  if (spec.op == ReduceOp::kAdasum) return adasum(spec, entries, contribution);
  const std::size_t element_bytes = element_size(spec.dtype);
  int64_t total_count = 0;
  for (const TensorEntry* entry : entries) total_count += entry->request.num_elements();
  const bool prescaled = !contribution.identity && spec.prescale != 1.0;

  // One tensor is reduced straight from its input into its output; only a
  // prescale, which must not touch the input, needs the copy made first.
  const void* input;
  uint8_t* buffer;
  // Tensors reduced in place that together fill one range of memory in the
  // group's order (views into one arena, herd::SharedBuffer) are reduced
  // where they lie, as one tensor: no fusion buffer, and the shared-memory
  // allreduce sees the arena's registration.
  const bool contiguous_in_place = in_place_and_contiguous(entries);
  if (contiguous_in_place) {
    input = entries.front()->input.data;
    buffer = static_cast<uint8_t*>(entries.front()->output.data);
  } else if (entries.size() == 1) {
    const TensorEntry& entry = *entries.front();
    input = entry.input.data;
    buffer = static_cast<uint8_t*>(entry.output.data);
    if (prescaled && input != buffer && total_count > 0) {
      std::memcpy(buffer, input, static_cast<std::size_t>(total_count) * element_bytes);
      input = buffer;
    }
  } else {
    buffer = pack(entries, static_cast<std::size_t>(total_count) * element_bytes);
    input = buffer;
  }
  if (prescaled) ops::scale(buffer, total_count, spec.dtype, spec.prescale);

  // The average's division and the postscale run inside the allreduce, on
  // each part of the result while it is in cache (allreduce.h). An average
  // divides by the whole set's size, joined ranks included.
  const bool average = spec.op == ReduceOp::kAverage;
  const int64_t ranks = transport_.size();
  collectives::FinishFn finish;
  if (average || spec.postscale != 1.0) {
    finish = [&spec, average, ranks](void* data, int64_t count) {
      if (average) {
        ops::average(data, count, spec.dtype, ranks, spec.postscale);
      } else {
        ops::scale(data, count, spec.dtype, spec.postscale);
      }
    };
  }
  const ReduceOp reduce_op = average ? ReduceOp::kSum : spec.op;
  const ops::ReduceFn reduce = ops::make_reduce_fn(spec.dtype, reduce_op);
  const std::size_t bytes = static_cast<std::size_t>(total_count) * element_bytes;
  if (!warmed_up_) HERD_RETURN_IF_ERROR(warm_up());
  const AllreduceChooser::Choice choice = choose(bytes);
  const auto started = std::chrono::steady_clock::now();
  {
    TimelineActivity reduction(entries, set_id_, activity_name(choice.path));
    // A fused group is unpacked right after: its result must stay in the
    // cache, whatever follows in the cycle.
    const std::size_t later = entries.size() > 1 && !contiguous_in_place ? 0 : later_bytes;
    HERD_RETURN_IF_ERROR(
        run(choice.path, input, buffer, total_count, element_bytes, reduce, finish, later));
  }
  if (algorithm_ == AllreduceAlgorithmSetting::kAuto && !hierarchical_forced()) {
    chooser_.record(
        bytes, choice.path,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    if (choice.agree_after) HERD_RETURN_IF_ERROR(agree(bytes));
  }

  if (entries.size() > 1 && !contiguous_in_place) unpack(entries, buffer);
  return Status::ok();
}

bool FusionExecutor::in_place_and_contiguous(const std::vector<TensorEntry*>& entries) {
  if (entries.size() < 2) return false;
  // The range must hold the tensors in the group's order, the order every
  // rank packs a fusion buffer in: ranks whose tensors are not contiguous,
  // or lie in another order, reduce their packed buffers against this range
  // element by element.
  const uint8_t* next = static_cast<const uint8_t*>(entries.front()->input.data);
  for (const TensorEntry* entry : entries) {
    if (entry->input.data != entry->output.data || entry->input.data != next ||
        entry->input.device != entries.front()->input.device) {
      return false;
    }
    next += entry->input.num_bytes();
  }
  return true;
}

uint8_t* FusionExecutor::pack(const std::vector<TensorEntry*>& entries, std::size_t total_bytes) {
  TimelineActivity copy_in(entries, set_id_, "MEMCPY_IN_FUSION_BUFFER");
  uint8_t* buffer = fusion_buffer(total_bytes);
  std::size_t offset = 0;
  for (const TensorEntry* entry : entries) {
    const std::size_t bytes = entry->input.num_bytes();
    if (bytes > 0) std::memcpy(buffer + offset, entry->input.data, bytes);
    offset += bytes;
  }
  return buffer;
}

void FusionExecutor::unpack(const std::vector<TensorEntry*>& entries, const uint8_t* buffer) {
  TimelineActivity copy_out(entries, set_id_, "MEMCPY_OUT_FUSION_BUFFER");
  std::size_t offset = 0;
  for (TensorEntry* entry : entries) {
    const std::size_t bytes = entry->output.num_bytes();
    if (bytes > 0) std::memcpy(entry->output.data, buffer + offset, bytes);
    offset += bytes;
  }
}

Status FusionExecutor::adasum(const Response& spec, const std::vector<TensorEntry*>& entries,
                              Contribution contribution) {
  // Adasum works in place: one tensor in its output, several in the fusion
  // buffer. A joined rank's input is zeros (the identity fill), which leaves
  // the other ranks' vectors unchanged.
  const std::size_t element_bytes = element_size(spec.dtype);
  std::vector<int64_t> counts;
  int64_t total_count = 0;
  for (const TensorEntry* entry : entries) {
    counts.push_back(entry->request.num_elements());
    total_count += counts.back();
  }
  uint8_t* buffer;
  if (entries.size() == 1) {
    const TensorEntry& entry = *entries.front();
    buffer = static_cast<uint8_t*>(entry.output.data);
    if (entry.input.data != entry.output.data && total_count > 0) {
      std::memcpy(buffer, entry.input.data, static_cast<std::size_t>(total_count) * element_bytes);
    }
  } else {
    buffer = pack(entries, static_cast<std::size_t>(total_count) * element_bytes);
  }
  if (!contribution.identity) ops::scale(buffer, total_count, spec.dtype, spec.prescale);
  // The submission checked the dtype and the set's size, so this fails only
  // on a transfer.
  {
    TimelineActivity reduction(entries, set_id_, "ADASUM_ALLREDUCE");
    HERD_RETURN_IF_ERROR(collectives::adasum_allreduce(buffer, counts, spec.dtype, transport_));
  }
  ops::scale(buffer, total_count, spec.dtype, spec.postscale);
  if (entries.size() > 1) unpack(entries, buffer);
  return Status::ok();
}

}  // namespace herd::detail
