// What the FusionExecutor tests hand to FusionExecutor::allreduce for
// float32 tensors: the negotiated Response of a (fused) call and the
// TensorEntry of one tensor over caller-owned buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "src/fusion_executor.h"

namespace herd::detail::testing {

// The Response of a float32 reduction of `count` elements in all.
inline Response float32_response(ReduceOp op, int64_t count) {
  Response spec;
  spec.dtype = DataType::kFloat32;
  spec.op = op;
  spec.shape = {count};
  return spec;
}

// A 1-D float32 tensor reading `input` and writing `output` (same size).
inline TensorEntry float32_entry(std::vector<float>& input, std::vector<float>& output) {
  TensorEntry entry;
  const auto count = static_cast<int64_t>(input.size());
  entry.request.dtype = DataType::kFloat32;
  entry.request.shape = {count};
  entry.input = TensorView{input.data(), DataType::kFloat32, {count}};
  entry.output = TensorView{output.data(), DataType::kFloat32, {count}};
  return entry;
}

}  // namespace herd::detail::testing
