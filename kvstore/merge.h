// Summing the values of one push (one per local device) into the merged
// value the engines apply, in list order so that a sum is reproducible.
#pragma once

#include <vector>

#include "herd/types.h"
#include "kvstore/gradient_compression.h"

namespace herd {
namespace kv {
namespace detail {

// out = ((values[0] + values[1]) + values[2]) + ..., elementwise in the
// values' dtype (each addition rounded to it; integers wrap). Every value and
// `out` have the same dtype and element count; `out` may be values[0].
void sum_values(const std::vector<TensorView>& values, TensorView out);

// out = values[0] + ... + values[n-1] with each value first replaced by its
// dequantized codes (each value with its own residual, residuals[i] holding
// as many floats as the value): the device store's compressed merge. float32;
// `out` must not be one of the values.
void sum_compressed(const CompressionParams& params, const std::vector<TensorView>& values,
                    std::vector<std::vector<float>>& residuals, TensorView out);

}  // namespace detail
}  // namespace kv
}  // namespace herd
