// The MLP of herd-train: gradients against central finite differences of an
// independent double-precision forward pass, the loss against hand-computed
// values, the backward hook's order, and the deterministic He initialization.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd_train/mlp.h"

namespace herd_train {
namespace {

// Mean softmax cross-entropy of the network whose parameters are `params`
// (fc1.weight, fc1.bias, ... as Mlp::parameters() orders them, in double),
// written from the definitions independently of mlp.cc.
double reference_loss(const std::vector<int64_t>& sizes,
                      const std::vector<std::vector<double>>& params,
                      const std::vector<float>& inputs, const std::vector<uint8_t>& labels) {
  const std::size_t batch = labels.size();
  const std::size_t layers = sizes.size() - 1;
  double total = 0;
  for (std::size_t i = 0; i < batch; ++i) {
    std::vector<double> a(inputs.begin() + i * sizes[0], inputs.begin() + (i + 1) * sizes[0]);
    for (std::size_t l = 0; l < layers; ++l) {
      const std::vector<double>& w = params[2 * l];
      const std::vector<double>& b = params[2 * l + 1];
      std::vector<double> z(sizes[l + 1]);
      for (int64_t o = 0; o < sizes[l + 1]; ++o) {
        double sum = b[o];
        for (int64_t k = 0; k < sizes[l]; ++k) sum += w[o * sizes[l] + k] * a[k];
        z[o] = (l + 1 < layers) ? std::max(sum, 0.0) : sum;
      }
      a = z;
    }
    double sum_exp = 0;
    for (double z : a) sum_exp += std::exp(z);
    total += std::log(sum_exp) - a[labels[i]];
  }
  return total / double(batch);
}

std::vector<std::vector<double>> parameters_in_double(const Mlp& model) {
  std::vector<std::vector<double>> result;
  for (const herd::Parameter& p : model.parameters()) {
    result.emplace_back(p.value(), p.value() + p.size());
  }
  return result;
}

// Inputs in [-1, 1] that differ from sample to sample.
std::vector<float> make_inputs(int64_t batch, int64_t features) {
  std::vector<float> x(std::size_t(batch * features));
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = float(std::sin(0.7 * double(i) + 0.3));
  return x;
}

TEST_CASE("every gradient element matches central finite differences", "[mlp]") {
  MlpOptions options;
  options.sizes = {5, 7, 6, 4};
  options.seed = 11;
  Mlp model(options);
  // Non-zero biases, so that their gradients are exercised away from the init.
  for (const herd::Parameter& p : model.parameters()) {
    if (p.name().find(".bias") != std::string::npos) {
      for (int64_t i = 0; i < p.size(); ++i) p.value()[i] = 0.1f * float(i % 3) - 0.05f;
    }
  }
  const int64_t batch = 3;
  const std::vector<float> x = make_inputs(batch, 5);
  const std::vector<uint8_t> labels = {2, 0, 3};

  const float loss = model.forward(x.data(), labels.data(), batch);
  std::vector<std::vector<double>> params = parameters_in_double(model);
  CHECK(loss == Approx(reference_loss(options.sizes, params, x, labels)).epsilon(1e-5));
  model.backward();

  const double h = 1e-6;
  int checked = 0;
  for (std::size_t p = 0; p < params.size(); ++p) {
    const herd::Parameter& param = model.parameters()[p];
    for (int64_t i = 0; i < param.size(); ++i) {
      const double saved = params[p][i];
      params[p][i] = saved + h;
      const double up = reference_loss(options.sizes, params, x, labels);
      params[p][i] = saved - h;
      const double down = reference_loss(options.sizes, params, x, labels);
      params[p][i] = saved;
      const double numeric = (up - down) / (2 * h);
      INFO(param.name() << "[" << i << "]: analytic " << param.grad()[i] << ", numeric "
                        << numeric);
      CHECK(std::abs(param.grad()[i] - numeric) <= 2e-5 + 1e-3 * std::abs(numeric));
      ++checked;
    }
  }
  CHECK(checked == model.num_parameters());
  CHECK(model.num_parameters() == 5 * 7 + 7 + 7 * 6 + 6 + 6 * 4 + 4);
}

TEST_CASE("accumulated gradients add up, overwritten ones do not", "[mlp]") {
  Mlp model(MlpOptions{{4, 3, 2}, 5});
  const std::vector<float> x = make_inputs(2, 4);
  const std::vector<uint8_t> labels = {1, 0};
  model.forward(x.data(), labels.data(), 2);
  model.backward();
  const std::vector<float> once(model.parameters()[0].grad(),
                                model.parameters()[0].grad() + model.parameters()[0].size());
  model.backward(nullptr, GradMode::kAccumulate);
  for (std::size_t i = 0; i < once.size(); ++i) {
    CHECK(model.parameters()[0].grad()[i] == Approx(2 * once[i]));
  }
  model.backward();
  for (std::size_t i = 0; i < once.size(); ++i) CHECK(model.parameters()[0].grad()[i] == once[i]);
  model.zero_grad();
  for (const herd::Parameter& p : model.parameters()) {
    CHECK(std::all_of(p.grad(), p.grad() + p.size(), [](float g) { return g == 0.0f; }));
  }
}

TEST_CASE("softmax cross-entropy matches hand-computed values", "[mlp]") {
  // One layer, weights 0 and bias (1, 2, 3): the logits are (1, 2, 3) for any input.
  Mlp model(MlpOptions{{2, 3}, 0});
  const herd::Parameter& weight = model.parameters()[0];
  const herd::Parameter& bias = model.parameters()[1];
  std::fill(weight.value(), weight.value() + weight.size(), 0.0f);
  bias.value()[0] = 1;
  bias.value()[1] = 2;
  bias.value()[2] = 3;
  const std::vector<float> x = {0.5f, -2.0f, 3.0f, 1.0f};
  // log(e + e^2 + e^3) = 3.40760596444438...
  const uint8_t first[] = {0};
  CHECK(model.forward(x.data(), first, 1) == Approx(2.4076059644443804).epsilon(1e-6));
  const uint8_t last[] = {2};
  CHECK(model.forward(x.data(), last, 1) == Approx(0.4076059644443804).epsilon(1e-6));
  const uint8_t both[] = {0, 1};  // the mean of 2.40760596 and 1.40760596
  CHECK(model.forward(x.data(), both, 2) == Approx(1.9076059644443804).epsilon(1e-6));
  CHECK(model.predictions() == std::vector<int>{2, 2});
  CHECK(model.correct() == 0);
  // Large logits do not overflow: the row maximum is subtracted first.
  bias.value()[0] = 1000;
  bias.value()[1] = 1000;
  bias.value()[2] = 0;
  CHECK(model.forward(x.data(), first, 1) == Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(model.correct() == 1);
  model.backward();  // d/dz = softmax - onehot = (-0.5, 0.5, 0)
  CHECK(bias.grad()[0] == Approx(-0.5));
  CHECK(bias.grad()[1] == Approx(0.5));
  CHECK(bias.grad()[2] == Approx(0.0).margin(1e-12));
}

TEST_CASE("the hook runs once per layer, last first, with final gradients", "[mlp]") {
  Mlp model(MlpOptions{{4, 5, 6, 3}, 2});
  const std::vector<float> x = make_inputs(4, 4);
  const std::vector<uint8_t> labels = {0, 1, 2, 1};
  model.forward(x.data(), labels.data(), 4);
  std::vector<int> order;
  std::vector<std::string> names;
  std::vector<std::vector<float>> at_hook;
  model.backward([&](int layer, const std::vector<herd::Parameter>& params) {
    order.push_back(layer);
    for (const herd::Parameter& p : params) {
      names.push_back(p.name());
      at_hook.emplace_back(p.grad(), p.grad() + p.size());
    }
  });
  CHECK(order == std::vector<int>{2, 1, 0});
  CHECK(names == std::vector<std::string>{"fc3.weight", "fc3.bias", "fc2.weight", "fc2.bias",
                                          "fc1.weight", "fc1.bias"});
  // What each hook saw is what the gradient buffers hold at the end.
  const std::vector<std::string> forward_names = {"fc1.weight", "fc1.bias",   "fc2.weight",
                                                  "fc2.bias",   "fc3.weight", "fc3.bias"};
  for (std::size_t k = 0; k < names.size(); ++k) {
    const std::size_t p =
        std::find(forward_names.begin(), forward_names.end(), names[k]) - forward_names.begin();
    const herd::Parameter& param = model.parameters()[p];
    CHECK(param.name() == names[k]);
    CHECK(at_hook[k] == std::vector<float>(param.grad(), param.grad() + param.size()));
  }
  CHECK(model.layer_parameters(1)[0].name() == "fc2.weight");
  CHECK_THROWS_AS(model.layer_parameters(3), herd::Error);
}

TEST_CASE("the He initialization is deterministic in the seed", "[mlp]") {
  MlpOptions options;
  options.seed = 42;
  Mlp a(options), b(options);
  options.seed = 43;
  Mlp c(options);
  REQUIRE(a.parameters().size() == 6);
  bool any_differs = false;
  for (std::size_t p = 0; p < a.parameters().size(); ++p) {
    const herd::Parameter &pa = a.parameters()[p], &pb = b.parameters()[p], &pc = c.parameters()[p];
    CHECK(std::equal(pa.value(), pa.value() + pa.size(), pb.value()));
    any_differs |= !std::equal(pa.value(), pa.value() + pa.size(), pc.value());
  }
  CHECK(any_differs);
  CHECK(a.num_parameters() == 784 * 256 + 256 + 256 * 128 + 128 + 128 * 10 + 10);

  // Biases start at 0; weights have mean 0 and standard deviation sqrt(2 / fan_in).
  for (int l = 0; l < a.num_layers(); ++l) {
    const herd::Parameter& weight = a.layer_parameters(l)[0];
    const herd::Parameter& bias = a.layer_parameters(l)[1];
    CHECK(std::all_of(bias.value(), bias.value() + bias.size(), [](float v) { return v == 0; }));
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < weight.size(); ++i) {
      sum += weight.value()[i];
      sum_sq += double(weight.value()[i]) * weight.value()[i];
    }
    const double n = double(weight.size());
    const double expected_std = std::sqrt(2.0 / double(a.sizes()[l]));
    INFO("layer " << l);
    CHECK(std::abs(sum / n) < 5 * expected_std / std::sqrt(n));
    CHECK(std::sqrt(sum_sq / n) == Approx(expected_std).epsilon(10 / std::sqrt(n) + 0.005));
  }
}

TEST_CASE("the first weights are the documented Box-Muller draws", "[mlp]") {
  // Seed 42, fan_in 4: sqrt(2 / 4) times the normals of mt19937_64(42) by
  // Box-Muller (mlp.cc), computed independently with a Python mt19937_64.
  Mlp model(MlpOptions{{4, 2}, 42});
  const float* w = model.parameters()[0].value();
  const double expected[] = {-0.34027229875687687, -0.4062589195752123, 0.34972359860931196,
                             0.4031368156664344};
  for (int i = 0; i < 4; ++i) {
    INFO("weight " << i);
    CHECK(w[i] == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("invalid sizes, labels and call orders are refused", "[mlp]") {
  CHECK_THROWS_WITH(Mlp(MlpOptions{{784}, 0}), Catch::Contains("at least two sizes"));
  CHECK_THROWS_WITH(Mlp(MlpOptions{{784, 0, 10}, 0}), Catch::Contains("size 1 is 0"));
  Mlp model(MlpOptions{{2, 3}, 0});
  const std::vector<float> x = {1, 2};
  const uint8_t bad[] = {3};
  CHECK_THROWS_WITH(model.forward(x.data(), bad, 1), Catch::Contains("label 3"));
  CHECK_THROWS_WITH(model.backward(), Catch::Contains("forward()"));
  CHECK_THROWS_AS(model.forward(x.data(), bad, 0), herd::Error);
  model.predict(x.data(), 1);
  CHECK(model.logits().rows() == 1);
  CHECK(model.logits().cols() == 3);
  CHECK_THROWS_AS(model.backward(), herd::Error);
}

TEST_CASE("parameter views survive a move of the model", "[mlp]") {
  Mlp a(MlpOptions{{3, 2}, 1});
  const std::vector<herd::Parameter> views = a.parameters();
  Mlp b(std::move(a));
  CHECK(b.parameters()[0].value() == views[0].value());
  CHECK(b.parameters()[1].grad() == views[1].grad());
}

}  // namespace
}  // namespace herd_train
