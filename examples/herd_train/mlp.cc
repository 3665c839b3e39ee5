#include "herd_train/mlp.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>

#include "herd/error.h"

namespace herd_train {
namespace {

// Standard normal draws from std::mt19937_64 by the Box-Muller transform.
// Each pair of 64-bit outputs x1, x2 gives two draws:
//   u1 = ((x1 >> 11) + 1) / 2^53   in (0, 1]  (so log(u1) is finite)
//   u2 = (x2 >> 11) / 2^53         in [0, 1)
//   r = sqrt(-2 ln u1); first r cos(2 pi u2), then r sin(2 pi u2).
// Computed in double; the same bits on every machine with the same libm.
class NormalGenerator {
 public:
  explicit NormalGenerator(uint64_t seed) : engine_(seed) {}

  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    constexpr double kTwoPow53 = 9007199254740992.0;
    constexpr double kTwoPi = 6.283185307179586476925286766559;
    const double u1 = static_cast<double>((engine_() >> 11) + 1) / kTwoPow53;
    const double u2 = static_cast<double>(engine_() >> 11) / kTwoPow53;
    const double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(kTwoPi * u2);
    has_spare_ = true;
    return r * std::cos(kTwoPi * u2);
  }

 private:
  std::mt19937_64 engine_;
  double spare_ = 0;
  bool has_spare_ = false;
};

using ConstRowMap = Eigen::Map<const Mlp::RowMatrix>;
using RowMap = Eigen::Map<Mlp::RowMatrix>;
using ConstVectorMap = Eigen::Map<const Eigen::RowVectorXf>;
using VectorMap = Eigen::Map<Eigen::RowVectorXf>;

}  // namespace

Mlp::Mlp(const MlpOptions& options) : sizes_(options.sizes) {
  if (sizes_.size() < 2) {
    throw herd::Error("MLP: needs at least two sizes (inputs and classes), got " +
                      std::to_string(sizes_.size()));
  }
  for (std::size_t i = 0; i < sizes_.size(); ++i) {
    if (sizes_[i] < 1) {
      std::ostringstream message;
      message << "MLP: size " << i << " is " << sizes_[i] << "; every size must be >= 1";
      throw herd::Error(message.str());
    }
  }
  NormalGenerator normal(options.seed);
  for (int l = 0; l < num_layers(); ++l) {
    const int64_t in = sizes_[l], out = sizes_[l + 1];
    const double scale = std::sqrt(2.0 / static_cast<double>(in));
    std::vector<float> weight(static_cast<std::size_t>(in * out));
    for (float& w : weight) w = static_cast<float>(scale * normal.next());
    weights_.push_back(std::move(weight));
    weight_grads_.emplace_back(static_cast<std::size_t>(in * out), 0.0f);
    biases_.emplace_back(static_cast<std::size_t>(out), 0.0f);
    bias_grads_.emplace_back(static_cast<std::size_t>(out), 0.0f);
  }
  build_parameters();
}

void Mlp::build_parameters() {
  for (int l = 0; l < num_layers(); ++l) {
    const std::string prefix = "fc" + std::to_string(l + 1);
    std::vector<herd::Parameter> layer = {
        herd::Parameter(prefix + ".weight", weights_[l].data(), weight_grads_[l].data(),
                        static_cast<int64_t>(weights_[l].size())),
        herd::Parameter(prefix + ".bias", biases_[l].data(), bias_grads_[l].data(),
                        static_cast<int64_t>(biases_[l].size()))};
    all_params_.insert(all_params_.end(), layer.begin(), layer.end());
    layer_params_.push_back(std::move(layer));
  }
}

int64_t Mlp::num_parameters() const {
  int64_t total = 0;
  for (const herd::Parameter& p : all_params_) total += p.size();
  return total;
}

const std::vector<herd::Parameter>& Mlp::layer_parameters(int layer) const {
  if (layer < 0 || layer >= num_layers()) {
    throw herd::Error("MLP: layer " + std::to_string(layer) + " out of range; the model has " +
                      std::to_string(num_layers()));
  }
  return layer_params_[layer];
}

// activations_[l] is the input of layer l; the last layer's output goes to logits_.
void Mlp::run_layers(const float* inputs, int64_t batch) {
  if (batch < 1) throw herd::Error("MLP: forward of an empty batch");
  if (inputs == nullptr) throw herd::Error("MLP: forward with null inputs");
  activations_.resize(static_cast<std::size_t>(num_layers()));
  activations_[0] = ConstRowMap(inputs, batch, input_size());
  for (int l = 0; l < num_layers(); ++l) {
    const ConstRowMap weight(weights_[l].data(), sizes_[l + 1], sizes_[l]);
    const ConstVectorMap bias(biases_[l].data(), sizes_[l + 1]);
    RowMatrix& out = l + 1 < num_layers() ? activations_[l + 1] : logits_;
    out.resize(batch, sizes_[l + 1]);
    out.noalias() = activations_[l] * weight.transpose();
    out.rowwise() += bias;
    if (l + 1 < num_layers()) out = out.cwiseMax(0.0f);  // ReLU
  }
}

void Mlp::predict(const float* inputs, int64_t batch) {
  can_backward_ = false;
  run_layers(inputs, batch);
}

float Mlp::forward(const float* inputs, const uint8_t* labels, int64_t batch) {
  can_backward_ = false;
  if (batch >= 1 && labels == nullptr) throw herd::Error("MLP: forward with null labels");
  for (int64_t i = 0; i < batch; ++i) {
    if (labels[i] >= num_classes()) {
      std::ostringstream message;
      message << "MLP: label " << int{labels[i]} << " of sample " << i << " is not a class 0.."
              << num_classes() - 1;
      throw herd::Error(message.str());
    }
  }
  run_layers(inputs, batch);
  labels_.assign(labels, labels + batch);

  // Softmax cross-entropy, row by row, on s = z - max(z) (so exp cannot
  // overflow and no large number is subtracted from another):
  //   loss_i = log(sum exp(s)) - s[y],
  //   d(mean loss)/dz = (exp(s) / sum exp(s) - onehot(y)) / batch.
  dlogits_.resize(batch, num_classes());
  double total = 0;
  for (int64_t i = 0; i < batch; ++i) {
    const Eigen::Array<float, 1, Eigen::Dynamic> shifted =
        logits_.row(i).array() - logits_.row(i).maxCoeff();
    const Eigen::Array<float, 1, Eigen::Dynamic> exps = shifted.exp();
    const float sum = exps.sum();
    total += static_cast<double>(std::log(sum) - shifted(labels[i]));
    dlogits_.row(i) = (exps / (sum * static_cast<float>(batch))).matrix();
    dlogits_(i, labels[i]) -= 1.0f / static_cast<float>(batch);
  }
  can_backward_ = true;
  return static_cast<float>(total / static_cast<double>(batch));
}

// For layer l, last first, with G = d(loss)/d(output of layer l) [batch][out]
// and A = its input [batch][in]:
//   dW = G^T A,  db = column sums of G   (then the hook: layer l is done)
//   G <- (G W) * [A > 0]                 (through layer l, then the ReLU before it)
void Mlp::backward(const GradHook& hook, GradMode mode) {
  if (!can_backward_) throw herd::Error("MLP: backward() needs a forward() with labels first");
  RowMatrix grad = dlogits_, next;
  for (int l = num_layers() - 1; l >= 0; --l) {
    const int64_t in = sizes_[l], out = sizes_[l + 1];
    RowMap weight_grad(weight_grads_[l].data(), out, in);
    VectorMap bias_grad(bias_grads_[l].data(), out);
    if (mode == GradMode::kOverwrite) {
      weight_grad.noalias() = grad.transpose() * activations_[l];
      bias_grad = grad.colwise().sum();
    } else {
      weight_grad.noalias() += grad.transpose() * activations_[l];
      bias_grad += grad.colwise().sum();
    }
    if (hook) hook(l, layer_params_[l]);
    if (l > 0) {
      const ConstRowMap weight(weights_[l].data(), out, in);
      next.noalias() = grad * weight;
      grad = (activations_[l].array() > 0.0f).select(next, 0.0f);
    }
  }
}

void Mlp::zero_grad() {
  for (auto& g : weight_grads_) std::fill(g.begin(), g.end(), 0.0f);
  for (auto& g : bias_grads_) std::fill(g.begin(), g.end(), 0.0f);
}

std::vector<int> Mlp::predictions() const {
  std::vector<int> result(static_cast<std::size_t>(logits_.rows()));
  for (Eigen::Index i = 0; i < logits_.rows(); ++i) {
    Eigen::Index best = 0;
    logits_.row(i).maxCoeff(&best);
    result[i] = static_cast<int>(best);
  }
  return result;
}

int64_t Mlp::correct() const {
  if (!can_backward_) return 0;
  const std::vector<int> predicted = predictions();
  int64_t count = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i) count += predicted[i] == labels_[i];
  return count;
}

}  // namespace herd_train
