// herd::Adam (include/herd/train/optimizer.h): torch.optim.Adam's and AdamW's
// documented algorithms, element by element in float32 with the bias
// corrections computed in double and rounded to float once per step, as
// PyTorch's single-tensor implementation does.
#include <fmt/format.h>

#include <cmath>

#include "herd/error.h"
#include "herd/train/optimizer.h"

namespace herd {
namespace {

const AdamOptions& checked(const AdamOptions& o) {
  auto require = [](bool ok, const char* what, double value) {
    if (!ok) throw Error(fmt::format("Adam: {} {} is invalid", what, value));
  };
  require(std::isfinite(o.lr) && o.lr >= 0, "lr", o.lr);
  require(o.beta1 >= 0 && o.beta1 < 1, "beta1 (must be in [0, 1))", o.beta1);
  require(o.beta2 >= 0 && o.beta2 < 1, "beta2 (must be in [0, 1))", o.beta2);
  require(std::isfinite(o.eps) && o.eps > 0, "eps (must be > 0)", o.eps);
  require(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "weight_decay", o.weight_decay);
  return o;
}

}  // namespace

Adam::Adam(const AdamOptions& options)
    : Optimizer(checked(options).lr, {"exp_avg", "exp_avg_sq"}), options_(options) {}

void Adam::update(const Parameter& param, const std::vector<float*>& slots, int64_t step) {
  const double lr = learning_rate();
  const double t = static_cast<double>(step);
  const float beta1 = static_cast<float>(options_.beta1);
  const float beta2 = static_cast<float>(options_.beta2);
  const float one_minus_beta1 = static_cast<float>(1.0 - options_.beta1);
  const float one_minus_beta2 = static_cast<float>(1.0 - options_.beta2);
  const float eps = static_cast<float>(options_.eps);
  const float step_size = static_cast<float>(lr / (1.0 - std::pow(options_.beta1, t)));
  const float bias_correction2_sqrt =
      static_cast<float>(std::sqrt(1.0 - std::pow(options_.beta2, t)));
  const bool decoupled = options_.decoupled_weight_decay;
  const float decay =
      static_cast<float>(decoupled ? 1.0 - lr * options_.weight_decay : options_.weight_decay);
  float* w = param.value();
  const float* grad = param.grad();
  float* m = slots[0];
  float* v = slots[1];
  for (int64_t i = 0; i < param.size(); ++i) {
    float g = grad[i];
    if (options_.weight_decay != 0) {
      if (decoupled) {
        w[i] *= decay;
      } else {
        g += decay * w[i];
      }
    }
    m[i] = beta1 * m[i] + one_minus_beta1 * g;
    v[i] = beta2 * v[i] + one_minus_beta2 * g * g;
    const float denom = std::sqrt(v[i]) / bias_correction2_sqrt + eps;
    w[i] -= step_size * (m[i] / denom);
  }
}

}  // namespace herd
