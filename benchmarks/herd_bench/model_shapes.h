// The parameter tensors of real models, for herd-bench's step benchmark:
// names and shapes as PyTorch registers them, built from each architecture's
// definition (stages, blocks, widths) rather than from a pasted list, so that
// the numbers below are checked, not copied.
//
//   resnet50:  torchvision's ResNet-50: 161 tensors, 25,557,032 floats.
//   bert-base: BERT-base uncased with its pooler (Hugging Face's BertModel):
//              199 tensors, 109,482,240 floats.
//
// Called by herd-bench's main thread and by the unit tests; pure functions,
// no shared state.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::bench {

enum class Model { kResNet50, kBertBase };

// "resnet50", "bert-base": the names --model takes.
std::string to_string(Model model);

// One trainable parameter (its gradient has the same name and shape).
struct ParameterTensor {
  std::string name;  // PyTorch's name, e.g. "layer1.0.conv2.weight"
  std::vector<int64_t> shape;

  int64_t num_elements() const;
};

// The parameters in registration order, the order of PyTorch's
// model.named_parameters(): the forward order. A backward pass produces their
// gradients in about the reverse order.
std::vector<ParameterTensor> model_parameters(Model model);
std::vector<ParameterTensor> resnet50_parameters();
std::vector<ParameterTensor> bert_base_parameters();

// The sum of num_elements over `parameters`.
int64_t total_elements(const std::vector<ParameterTensor>& parameters);

}  // namespace herd::bench
