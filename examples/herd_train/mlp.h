// The multilayer perceptron herd-train trains: fully connected layers with
// ReLU between them and softmax cross-entropy on the last, in float32 with
// Eigen, forward and backward written out here.
//
// Layer l (counted from 1 in names, from 0 in code) maps sizes[l-1] inputs to
// sizes[l] outputs: z = a W^T + b, with W stored row-major [out][in] and b
// [out] as PyTorch's nn.Linear stores them; every layer but the last is
// followed by ReLU. Its parameters are named "fc<l>.weight" and "fc<l>.bias".
// The loss is the mean over the batch of softmax cross-entropy,
//   loss_i = logsumexp(z_i) - z_i[y_i],
// computed with the row maximum subtracted so that it cannot overflow.
//
// Initialization (He/Kaiming normal, deterministic from a seed): every
// weight is drawn from N(0, 2 / fan_in), fan_in = the layer's inputs, and
// every bias is 0. The normal draws come from std::mt19937_64 (whose output
// the C++ standard fixes) seeded with the seed, through the Box-Muller
// transform written in mlp.cc, in the order fc1.weight, fc2.weight, ...,
// element by element: so two models built with the same sizes and seed are
// identical, on every rank (std::normal_distribution is not used: its
// output differs between standard libraries).
//
// backward() writes the gradient of the mean loss into each parameter's
// gradient buffer, last layer first, and calls a hook as soon as a layer's
// gradients are complete: the place where a DistributedOptimizer starts
// their allreduce while the rest of the backward pass runs. backward()
// never writes a layer's gradients again after its hook.
//
// Single-threaded: a model, its parameters and its hook belong to one thread
// at a time (Eigen may still use several threads inside a product if built
// with OpenMP; herd-train does not enable it).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include <Eigen/Core>

#include "herd/train/optimizer.h"

namespace herd_train {

struct MlpOptions {
  // Input size, hidden sizes..., number of classes; at least two entries, each >= 1.
  std::vector<int64_t> sizes = {784, 256, 128, 10};
  uint64_t seed = 0;  // for the He initialization
};

enum class GradMode {
  kOverwrite,   // gradient buffers := this batch's gradient
  kAccumulate,  // gradient buffers += this batch's gradient (zero_grad() first)
};

class Mlp {
 public:
  using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  // Called by backward() once per layer, last layer first, when the
  // gradients of `layer` (0-based; its parameters are `params`, weight then
  // bias) are complete.
  using GradHook = std::function<void(int layer, const std::vector<herd::Parameter>& params)>;

  // Throws herd::Error when the sizes are invalid.
  explicit Mlp(const MlpOptions& options);
  // The parameter views point into the model's heap buffers, which a move
  // keeps: views taken before a move stay valid for the moved-to model.
  Mlp(Mlp&&) = default;
  Mlp& operator=(Mlp&&) = default;
  Mlp(const Mlp&) = delete;
  Mlp& operator=(const Mlp&) = delete;

  const std::vector<int64_t>& sizes() const { return sizes_; }
  int num_layers() const { return static_cast<int>(sizes_.size()) - 1; }
  int64_t input_size() const { return sizes_.front(); }
  int64_t num_classes() const { return sizes_.back(); }
  int64_t num_parameters() const;  // elements, weights and biases of every layer

  // Every parameter in forward order: fc1.weight, fc1.bias, fc2.weight, ...
  // Views over the model's own storage (see Parameter for the lifetime).
  const std::vector<herd::Parameter>& parameters() const { return all_params_; }
  // The two parameters (weight, bias) of one layer, 0-based.
  const std::vector<herd::Parameter>& layer_parameters(int layer) const;

  // Forward pass of `batch` samples: `inputs` is [batch][input_size()]
  // row-major, `labels` [batch] with each label < num_classes(). Returns the
  // mean cross-entropy loss and keeps what backward() needs; logits() and
  // predictions() then describe this batch. Throws herd::Error on an empty
  // batch or a label out of range.
  float forward(const float* inputs, const uint8_t* labels, int64_t batch);

  // Forward pass without labels or loss (evaluation); fills logits().
  void predict(const float* inputs, int64_t batch);

  // Backward pass of the last forward(): fills every gradient buffer (per
  // `mode`), calling `hook` (if set) after each layer, last layer first.
  // Throws herd::Error when forward() has not run since the last predict().
  void backward(const GradHook& hook = nullptr, GradMode mode = GradMode::kOverwrite);

  void zero_grad();

  // [batch][num_classes()] of the last forward() or predict().
  const RowMatrix& logits() const { return logits_; }
  // Index of the largest logit of each sample (the first on ties).
  std::vector<int> predictions() const;
  // How many of the last forward()'s samples were predicted right.
  int64_t correct() const;

 private:
  void run_layers(const float* inputs, int64_t batch);
  void build_parameters();

  std::vector<int64_t> sizes_;
  std::vector<std::vector<float>> weights_, weight_grads_;  // [layer][out * in]
  std::vector<std::vector<float>> biases_, bias_grads_;     // [layer][out]
  std::vector<herd::Parameter> all_params_;
  std::vector<std::vector<herd::Parameter>> layer_params_;

  std::vector<RowMatrix> activations_;  // [layer]: the input of layer l, [batch][in]
  RowMatrix logits_;
  RowMatrix dlogits_;  // d(mean loss)/d(logits), from forward()
  std::vector<uint8_t> labels_;
  bool can_backward_ = false;
};

}  // namespace herd_train
