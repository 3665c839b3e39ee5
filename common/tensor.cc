// Definitions for herd::Tensor (include/herd/tensor.h).
#include "herd/tensor.h"

#include "common/enforce.h"

namespace herd {

void Tensor::reset(DataType dtype, std::vector<int64_t> shape) {
  for (int64_t extent : shape) HERD_ENFORCE_GE(extent, 0);
  dtype_ = dtype;
  shape_ = std::move(shape);
  const std::size_t bytes = num_bytes();
  const std::size_t words = (bytes + sizeof(std::max_align_t) - 1) / sizeof(std::max_align_t);
  // Always own a buffer, even for zero elements, so data() is never null.
  storage_.reset(new std::max_align_t[words > 0 ? words : 1]);
}

int64_t Tensor::num_elements() const {
  int64_t n = 1;
  for (int64_t extent : shape_) n *= extent;
  return n;
}

}  // namespace herd
