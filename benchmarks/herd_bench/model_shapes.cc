#include "benchmarks/herd_bench/model_shapes.h"

#include <stdexcept>

namespace herd::bench {
namespace {

// Appends parameters in the order the layers register them, with PyTorch's
// shapes: a convolution's weight is [out, in, k, k]; a linear layer's weight
// is [out, in] (it computes x W^T + b).
class ParameterList {
 public:
  // nn.Conv2d(in, out, kernel, bias=False), as every convolution of ResNet.
  void conv(const std::string& name, int64_t in_channels, int64_t out_channels, int64_t kernel) {
    add(name + ".weight", {out_channels, in_channels, kernel, kernel});
  }

  // nn.BatchNorm2d: a scale and a shift per channel. The running mean and
  // variance are buffers, not parameters: they have no gradient.
  void batch_norm(const std::string& name, int64_t channels) {
    add(name + ".weight", {channels});
    add(name + ".bias", {channels});
  }

  // nn.Linear(in, out) with its bias.
  void linear(const std::string& name, int64_t in_features, int64_t out_features) {
    add(name + ".weight", {out_features, in_features});
    add(name + ".bias", {out_features});
  }

  // nn.LayerNorm(width): a scale and a shift per feature.
  void layer_norm(const std::string& name, int64_t width) {
    add(name + ".weight", {width});
    add(name + ".bias", {width});
  }

  // nn.Embedding(rows, width): one row per token id or position.
  void embedding(const std::string& name, int64_t rows, int64_t width) {
    add(name + ".weight", {rows, width});
  }

  std::vector<ParameterTensor> take() { return std::move(parameters_); }

 private:
  void add(std::string name, std::vector<int64_t> shape) {
    parameters_.push_back(ParameterTensor{std::move(name), std::move(shape)});
  }

  std::vector<ParameterTensor> parameters_;
};

// ResNet-50 (He et al. 2015, as torchvision builds it; version 1.5, whose
// stride sits on the 3x3 convolution, which changes no shape).
constexpr int64_t kImageChannels = 3;
constexpr int64_t kStemChannels = 64;  // conv1: 7x7, stride 2
constexpr int64_t kStemKernel = 7;
constexpr int kResNetStages = 4;
constexpr int kBlocksPerStage[kResNetStages] = {3, 4, 6, 3};
constexpr int64_t kStageWidths[kResNetStages] = {64, 128, 256, 512};
// A bottleneck narrows to its width with a 1x1 convolution, runs a 3x3 at
// that width, and widens to width * kBottleneckExpansion with another 1x1.
constexpr int64_t kBottleneckExpansion = 4;
constexpr int64_t kImageNetClasses = 1000;

// BERT-base (Devlin et al. 2018), uncased vocabulary.
constexpr int64_t kBertVocabulary = 30522;
constexpr int64_t kBertMaxPositions = 512;
constexpr int64_t kBertTokenTypes = 2;  // sentence A and sentence B
constexpr int64_t kBertHidden = 768;
constexpr int64_t kBertIntermediate = 3072;  // the feed-forward width, 4 * hidden
constexpr int kBertLayers = 12;

}  // namespace

std::string to_string(Model model) {
  switch (model) {
    case Model::kResNet50: return "resnet50";
    case Model::kBertBase: return "bert-base";
  }
  return "unknown";
}

int64_t ParameterTensor::num_elements() const {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

std::vector<ParameterTensor> resnet50_parameters() {
  ParameterList list;
  list.conv("conv1", kImageChannels, kStemChannels, kStemKernel);
  list.batch_norm("bn1", kStemChannels);
  // Each stage is a run of bottlenecks ("layer1".."layer4"). The first block
  // of a stage changes the channel count (and, from layer2 on, halves the
  // resolution), so its shortcut is a 1x1 convolution and a batch norm
  // ("downsample.0", "downsample.1") instead of the identity.
  int64_t in_channels = kStemChannels;
  for (int stage = 0; stage < kResNetStages; ++stage) {
    const int64_t width = kStageWidths[stage];
    const int64_t out_channels = width * kBottleneckExpansion;
    for (int block = 0; block < kBlocksPerStage[stage]; ++block) {
      const std::string prefix =
          "layer" + std::to_string(stage + 1) + "." + std::to_string(block) + ".";
      list.conv(prefix + "conv1", in_channels, width, 1);
      list.batch_norm(prefix + "bn1", width);
      list.conv(prefix + "conv2", width, width, 3);
      list.batch_norm(prefix + "bn2", width);
      list.conv(prefix + "conv3", width, out_channels, 1);
      list.batch_norm(prefix + "bn3", out_channels);
      if (block == 0) {
        list.conv(prefix + "downsample.0", in_channels, out_channels, 1);
        list.batch_norm(prefix + "downsample.1", out_channels);
      }
      in_channels = out_channels;
    }
  }
  // Global average pooling has no parameters; the classifier reads its
  // in_channels (2048) features.
  list.linear("fc", in_channels, kImageNetClasses);
  return list.take();
}

std::vector<ParameterTensor> bert_base_parameters() {
  ParameterList list;
  list.embedding("embeddings.word_embeddings", kBertVocabulary, kBertHidden);
  list.embedding("embeddings.position_embeddings", kBertMaxPositions, kBertHidden);
  list.embedding("embeddings.token_type_embeddings", kBertTokenTypes, kBertHidden);
  list.layer_norm("embeddings.LayerNorm", kBertHidden);
  // Each encoder layer: self-attention (query, key and value projections,
  // then the output projection, a residual and a LayerNorm), then the
  // feed-forward block (widen to the intermediate size, narrow back, a
  // residual and a LayerNorm).
  for (int layer = 0; layer < kBertLayers; ++layer) {
    const std::string prefix = "encoder.layer." + std::to_string(layer) + ".";
    list.linear(prefix + "attention.self.query", kBertHidden, kBertHidden);
    list.linear(prefix + "attention.self.key", kBertHidden, kBertHidden);
    list.linear(prefix + "attention.self.value", kBertHidden, kBertHidden);
    list.linear(prefix + "attention.output.dense", kBertHidden, kBertHidden);
    list.layer_norm(prefix + "attention.output.LayerNorm", kBertHidden);
    list.linear(prefix + "intermediate.dense", kBertHidden, kBertIntermediate);
    list.linear(prefix + "output.dense", kBertIntermediate, kBertHidden);
    list.layer_norm(prefix + "output.LayerNorm", kBertHidden);
  }
  // The pooler: a dense layer on the first token's hidden state.
  list.linear("pooler.dense", kBertHidden, kBertHidden);
  return list.take();
}

std::vector<ParameterTensor> model_parameters(Model model) {
  switch (model) {
    case Model::kResNet50: return resnet50_parameters();
    case Model::kBertBase: return bert_base_parameters();
  }
  throw std::invalid_argument("herd-bench: unknown model");
}

int64_t total_elements(const std::vector<ParameterTensor>& parameters) {
  int64_t total = 0;
  for (const ParameterTensor& p : parameters) total += p.num_elements();
  return total;
}

}  // namespace herd::bench
