#include "src/fusion_executor.h"

#include <cstring>

#include "ops/reduce.h"

namespace herd::detail {

FusionExecutor::FusionExecutor(collectives::Transport& transport,
                               collectives::AllreduceOptions options)
    : transport_(transport), options_(options) {}

uint8_t* FusionExecutor::fusion_buffer(std::size_t bytes) {
  if (bytes > fusion_buffer_capacity_) {
    // No value-initialization: every byte used is packed before it is read.
    fusion_buffer_.reset(new uint8_t[bytes]);
    fusion_buffer_capacity_ = bytes;
  }
  return fusion_buffer_.get();
}

Status FusionExecutor::allreduce(const Response& spec, const std::vector<TensorEntry*>& entries,
                                 Contribution contribution) {
  const std::size_t element_bytes = element_size(spec.dtype);
  int64_t total_count = 0;
  for (const TensorEntry* entry : entries) total_count += entry->request.num_elements();

  // One tensor: reduce in its output, sparing two copies of the whole tensor.
  uint8_t* buffer;
  if (entries.size() == 1) {
    const TensorEntry& entry = *entries.front();
    buffer = static_cast<uint8_t*>(entry.output.data);
    if (entry.input.data != entry.output.data && total_count > 0) {
      std::memcpy(buffer, entry.input.data, static_cast<std::size_t>(total_count) * element_bytes);
    }
  } else {
    buffer = fusion_buffer(static_cast<std::size_t>(total_count) * element_bytes);
    std::size_t offset = 0;
    for (const TensorEntry* entry : entries) {
      const std::size_t bytes = entry->input.num_bytes();
      if (bytes > 0) std::memcpy(buffer + offset, entry->input.data, bytes);
      offset += bytes;
    }
  }

  if (!contribution.identity) ops::scale(buffer, total_count, spec.dtype, spec.prescale);
  const ReduceOp reduce_op = spec.op == ReduceOp::kAverage ? ReduceOp::kSum : spec.op;
  HERD_RETURN_IF_ERROR(collectives::allreduce(buffer, total_count, element_bytes,
                                              ops::make_reduce_fn(spec.dtype, reduce_op),
                                              transport_, options_));
  if (spec.op == ReduceOp::kAverage)
    ops::divide(buffer, total_count, spec.dtype,
                contribution.ranks > 0 ? contribution.ranks : transport_.size());
  ops::scale(buffer, total_count, spec.dtype, spec.postscale);

  if (entries.size() > 1) {
    std::size_t offset = 0;
    for (TensorEntry* entry : entries) {
      const std::size_t bytes = entry->output.num_bytes();
      if (bytes > 0) std::memcpy(entry->output.data, buffer + offset, bytes);
      offset += bytes;
    }
  }
  return Status::ok();
}

}  // namespace herd::detail
