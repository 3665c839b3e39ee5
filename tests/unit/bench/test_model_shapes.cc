// model_shapes: the published parameter counts of ResNet-50 and BERT-base,
// the number of tensors, their order and a few named shapes.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "benchmarks/herd_bench/model_shapes.h"

namespace herd::bench {
namespace {

const ParameterTensor& find(const std::vector<ParameterTensor>& parameters,
                            const std::string& name) {
  const auto it = std::find_if(parameters.begin(), parameters.end(),
                               [&](const ParameterTensor& p) { return p.name == name; });
  if (it == parameters.end()) FAIL("no parameter named " << name);
  return *it;
}

std::size_t count_containing(const std::vector<ParameterTensor>& parameters,
                             const std::string& part) {
  return static_cast<std::size_t>(std::count_if(
      parameters.begin(), parameters.end(),
      [&](const ParameterTensor& p) { return p.name.find(part) != std::string::npos; }));
}

bool names_unique(const std::vector<ParameterTensor>& parameters) {
  std::set<std::string> names;
  for (const ParameterTensor& p : parameters) names.insert(p.name);
  return names.size() == parameters.size();
}

using Shape = std::vector<int64_t>;

TEST_CASE("ResNet-50 has torchvision's 161 parameters and 25,557,032 floats") {
  const std::vector<ParameterTensor> parameters = resnet50_parameters();
  CHECK(parameters.size() == 161);
  CHECK(total_elements(parameters) == 25557032);
  CHECK(names_unique(parameters));
  CHECK(model_parameters(Model::kResNet50).size() == parameters.size());

  // Registration order: the stem first, the classifier last.
  CHECK(parameters.front().name == "conv1.weight");
  CHECK(parameters[1].name == "bn1.weight");
  CHECK(parameters[3].name == "layer1.0.conv1.weight");
  CHECK(parameters[parameters.size() - 2].name == "fc.weight");
  CHECK(parameters.back().name == "fc.bias");

  CHECK(parameters.front().shape == Shape{64, 3, 7, 7});
  CHECK(find(parameters, "layer1.0.conv1.weight").shape == Shape{64, 64, 1, 1});
  CHECK(find(parameters, "layer1.0.conv3.weight").shape == Shape{256, 64, 1, 1});
  CHECK(find(parameters, "layer1.0.downsample.0.weight").shape == Shape{256, 64, 1, 1});
  CHECK(find(parameters, "layer2.0.conv1.weight").shape == Shape{128, 256, 1, 1});
  CHECK(find(parameters, "layer3.5.conv2.weight").shape == Shape{256, 256, 3, 3});
  CHECK(find(parameters, "layer4.0.downsample.0.weight").shape == Shape{2048, 1024, 1, 1});
  CHECK(find(parameters, "layer4.2.bn3.bias").shape == Shape{2048});
  CHECK(find(parameters, "fc.weight").shape == Shape{1000, 2048});
  CHECK(find(parameters, "fc.bias").shape == Shape{1000});

  // Blocks [3, 4, 6, 3]; a downsample (conv + bn weight and bias) in the
  // first block of each stage only.
  CHECK(count_containing(parameters, "layer3.5.") == 9);
  CHECK(count_containing(parameters, "layer3.6.") == 0);
  CHECK(count_containing(parameters, "layer4.2.") == 9);
  CHECK(count_containing(parameters, "downsample") == 12);
  CHECK(count_containing(parameters, ".0.downsample.") == 12);
}

TEST_CASE("BERT-base has 199 parameters and 109,482,240 floats") {
  const std::vector<ParameterTensor> parameters = bert_base_parameters();
  CHECK(parameters.size() == 199);
  CHECK(total_elements(parameters) == 109482240);
  CHECK(names_unique(parameters));
  CHECK(model_parameters(Model::kBertBase).size() == parameters.size());

  CHECK(parameters.front().name == "embeddings.word_embeddings.weight");
  CHECK(parameters.front().shape == Shape{30522, 768});
  CHECK(find(parameters, "embeddings.position_embeddings.weight").shape == Shape{512, 768});
  CHECK(find(parameters, "embeddings.token_type_embeddings.weight").shape == Shape{2, 768});
  CHECK(find(parameters, "embeddings.LayerNorm.bias").shape == Shape{768});
  CHECK(parameters[5].name == "encoder.layer.0.attention.self.query.weight");
  CHECK(find(parameters, "encoder.layer.0.attention.self.key.weight").shape == Shape{768, 768});
  CHECK(find(parameters, "encoder.layer.11.intermediate.dense.weight").shape == Shape{3072, 768});
  CHECK(find(parameters, "encoder.layer.11.intermediate.dense.bias").shape == Shape{3072});
  CHECK(find(parameters, "encoder.layer.7.output.dense.weight").shape == Shape{768, 3072});
  CHECK(find(parameters, "encoder.layer.7.output.LayerNorm.weight").shape == Shape{768});
  CHECK(parameters.back().name == "pooler.dense.bias");
  CHECK(parameters.back().shape == Shape{768});
  CHECK(count_containing(parameters, "encoder.layer.11.") == 16);
  CHECK(count_containing(parameters, "encoder.layer.12.") == 0);
}

TEST_CASE("model names are the ones --model takes") {
  CHECK(to_string(Model::kResNet50) == "resnet50");
  CHECK(to_string(Model::kBertBase) == "bert-base");
}

}  // namespace
}  // namespace herd::bench
