// herd::Parameter (include/herd/train/optimizer.h): checks that a parameter and its
// gradient are two disjoint float32 host buffers of one size.
#include <fmt/format.h>

#include <functional>

#include "herd/error.h"
#include "herd/train/optimizer.h"

namespace herd {
namespace {

void check_view(const std::string& name, const char* which, const TensorView& view) {
  if (view.dtype != DataType::kFloat32) {
    throw Error(fmt::format("parameter '{}': {} is {}; herd's optimizers update float32 only", name,
                            which, to_string(view.dtype)));
  }
  if (view.device.type != DeviceType::kCPU) {
    throw Error(fmt::format("parameter '{}': {} is on {}; herd's optimizers update host memory",
                            name, which, to_string(view.device)));
  }
  for (int64_t extent : view.shape) {
    if (extent < 0) {
      throw Error(fmt::format("parameter '{}': {} has a negative extent in shape {}", name, which,
                              shape_to_string(view.shape)));
    }
  }
}

// The element count of a float32 host parameter; throws when either view is
// not one or their element counts differ.
int64_t checked_size(const std::string& name, const TensorView& value, const TensorView& grad) {
  check_view(name, "the value", value);
  check_view(name, "the gradient", grad);
  if (value.num_elements() != grad.num_elements()) {
    throw Error(fmt::format(
        "parameter '{}': the value has {} elements (shape {}), the gradient {} (shape {})", name,
        value.num_elements(), shape_to_string(value.shape), grad.num_elements(),
        shape_to_string(grad.shape)));
  }
  return value.num_elements();
}

}  // namespace

Parameter::Parameter(std::string name, float* value, float* grad, int64_t size)
    : name_(std::move(name)), value_(value), grad_(grad), size_(size) {
  if (name_.empty()) throw Error("parameter: the name is empty");
  if (size_ < 0) throw Error(fmt::format("parameter '{}': size {} is negative", name_, size_));
  if (size_ > 0 && (value_ == nullptr || grad_ == nullptr)) {
    throw Error(fmt::format("parameter '{}': {} is null for {} elements", name_,
                            value_ == nullptr ? "the value" : "the gradient", size_));
  }
  // Disjoint buffers: an update that reads the gradient while writing the
  // value would otherwise depend on the order of its loop. std::less gives a
  // total order on unrelated pointers.
  const std::less<const float*> before;
  if (size_ > 0 && before(value_, grad_ + size_) && before(grad_, value_ + size_)) {
    throw Error(fmt::format("parameter '{}': the value and the gradient overlap", name_));
  }
}

Parameter::Parameter(std::string name, TensorView value, TensorView grad)
    : Parameter(name, static_cast<float*>(value.data), static_cast<float*>(grad.data),
                checked_size(name, value, grad)) {}

}  // namespace herd
