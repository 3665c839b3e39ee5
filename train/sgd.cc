// herd::SGD (include/herd/train/optimizer.h): torch.optim.SGD's documented
// algorithm, element by element in float32 as PyTorch computes it for a
// float32 parameter, with the hyperparameters rounded to float once.
#include <fmt/format.h>

#include <cmath>

#include "herd/error.h"
#include "herd/train/optimizer.h"

namespace herd {
namespace {

const SGDOptions& checked(const SGDOptions& o) {
  auto require = [](bool ok, const char* what, double value) {
    if (!ok) throw Error(fmt::format("SGD: {} {} is invalid", what, value));
  };
  require(std::isfinite(o.lr) && o.lr >= 0, "lr", o.lr);
  require(std::isfinite(o.momentum) && o.momentum >= 0, "momentum", o.momentum);
  require(std::isfinite(o.dampening), "dampening", o.dampening);
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "weight_decay", o.weight_decay);
  if (o.nesterov && (o.momentum <= 0 || o.dampening != 0)) {
    throw Error(fmt::format(
        "SGD: nesterov needs momentum > 0 and dampening == 0; got momentum {} and dampening {}",
        o.momentum, o.dampening));
  }
  return o;
}

}  // namespace

SGD::SGD(const SGDOptions& options)
    : Optimizer(checked(options).lr, options.momentum != 0 ? std::vector<std::string>{"momentum"}
                                                           : std::vector<std::string>{}),
      options_(options) {}

void SGD::update(const Parameter& param, const std::vector<float*>& slots, int64_t step) {
  const float lr = static_cast<float>(learning_rate());
  const float weight_decay = static_cast<float>(options_.weight_decay);
  const float momentum = static_cast<float>(options_.momentum);
  const float keep = static_cast<float>(1.0 - options_.dampening);
  float* w = param.value();
  const float* grad = param.grad();
  float* buf = options_.momentum != 0 ? slots[0] : nullptr;
  for (int64_t i = 0; i < param.size(); ++i) {
    float g = grad[i];
    if (weight_decay != 0) g += weight_decay * w[i];
    if (buf != nullptr) {
      // PyTorch starts the buffer at the first gradient itself, undamped.
      buf[i] = step == 1 ? g : momentum * buf[i] + keep * g;
      g = options_.nesterov ? g + momentum * buf[i] : buf[i];
    }
    w[i] -= lr * g;
  }
}

}  // namespace herd
