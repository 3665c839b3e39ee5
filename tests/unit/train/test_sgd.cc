// herd::SGD against torch.optim.SGD's documented algorithm, recomputed here
// in double, and against numbers worked out by hand.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/optimizer.h"
#include "tests/unit/train/optimizer_test_util.h"

namespace herd {
namespace {

using test::check_close;
using test::OwnedParam;

// torch.optim.SGD for one tensor, in double: `grads[t]` is the gradient at
// step t + 1; returns the parameter after every step.
std::vector<std::vector<double>> sgd_reference(std::vector<double> w,
                                               const std::vector<std::vector<double>>& grads,
                                               const SGDOptions& o) {
  std::vector<double> b(w.size(), 0.0);
  std::vector<std::vector<double>> history;
  for (std::size_t t = 0; t < grads.size(); ++t) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      double g = grads[t][i] + o.weight_decay * w[i];
      if (o.momentum != 0) {
        b[i] = t == 0 ? g : o.momentum * b[i] + (1 - o.dampening) * g;
        g = o.nesterov ? g + o.momentum * b[i] : b[i];
      }
      w[i] -= o.lr * g;
    }
    history.push_back(w);
  }
  return history;
}

const std::vector<float> kStart = {0.5f, -1.25f, 2.0f};
const std::vector<std::vector<double>> kGrads = {
    {0.1, -0.2, 0.3}, {-0.4, 0.5, 0.25}, {0.75, 0.125, -1.5}};

void check_against_reference(const SGDOptions& options) {
  OwnedParam p("layer.weight", kStart);
  SGD sgd(options);
  const auto expected =
      sgd_reference(std::vector<double>(kStart.begin(), kStart.end()), kGrads, options);
  for (std::size_t t = 0; t < kGrads.size(); ++t) {
    for (std::size_t i = 0; i < kStart.size(); ++i) p.grad[i] = static_cast<float>(kGrads[t][i]);
    sgd.step({p.view()});
    check_close(p.value, expected[t], "step " + std::to_string(t + 1));
  }
  CHECK(sgd.step_count() == 3);
}

TEST_CASE("plain SGD by hand: w <- w - lr * g", "[sgd]") {
  OwnedParam p("w", {1.0f, -2.0f});
  SGD sgd(SGDOptions{0.1});
  p.grad = {0.5f, -1.0f};
  sgd.step({p.view()});
  check_close(p.value, {0.95, -1.9}, "step 1");
  sgd.step({p.view()});
  check_close(p.value, {0.9, -1.8}, "step 2");
  CHECK(sgd.export_state().buffers.empty());  // no momentum, no state
}

TEST_CASE("SGD momentum by hand: the first step takes the gradient undamped", "[sgd]") {
  // lr 0.1, momentum 0.9, dampening 0.5, w = 1, g = 1 twice:
  //   step 1: b = g = 1 (not 0.5: the buffer starts at the gradient), w = 0.9
  //   step 2: b = 0.9 * 1 + 0.5 * 1 = 1.4, w = 0.9 - 0.14 = 0.76
  OwnedParam p("w", {1.0f});
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.dampening = 0.5;
  SGD sgd(o);
  p.grad = {1.0f};
  sgd.step({p.view()});
  check_close(p.value, {0.9}, "step 1");
  sgd.step({p.view()});
  check_close(p.value, {0.76}, "step 2");
  const OptimizerState state = sgd.export_state();
  REQUIRE(state.buffers.size() == 1);
  CHECK(state.buffers[0].name == "w/momentum");
  check_close(state.buffers[0].values, {1.4}, "momentum buffer");
}

TEST_CASE("SGD Nesterov by hand", "[sgd]") {
  // lr 0.1, momentum 0.5, nesterov, w = 2, g = 1 twice:
  //   step 1: b = 1, g' = 1 + 0.5 * 1 = 1.5, w = 2 - 0.15 = 1.85
  //   step 2: b = 0.5 + 1 = 1.5, g' = 1 + 0.75 = 1.75, w = 1.85 - 0.175 = 1.675
  OwnedParam p("w", {2.0f});
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.5;
  o.nesterov = true;
  SGD sgd(o);
  p.grad = {1.0f};
  sgd.step({p.view()});
  check_close(p.value, {1.85}, "step 1");
  sgd.step({p.view()});
  check_close(p.value, {1.675}, "step 2");
}

TEST_CASE("SGD follows torch's algorithm for every option", "[sgd]") {
  SGDOptions o;
  o.lr = 0.05;
  SECTION("plain") { check_against_reference(o); }
  SECTION("weight decay") {
    o.weight_decay = 0.01;
    check_against_reference(o);
  }
  SECTION("momentum") {
    o.momentum = 0.9;
    check_against_reference(o);
  }
  SECTION("momentum with dampening and weight decay") {
    o.momentum = 0.8;
    o.dampening = 0.3;
    o.weight_decay = 0.1;
    check_against_reference(o);
  }
  SECTION("nesterov with weight decay") {
    o.momentum = 0.9;
    o.nesterov = true;
    o.weight_decay = 0.05;
    check_against_reference(o);
  }
}

TEST_CASE("SGD uses the learning rate set between steps", "[sgd]") {
  OwnedParam p("w", {1.0f});
  SGD sgd(SGDOptions{0.1});
  p.grad = {1.0f};
  sgd.step({p.view()});
  sgd.set_learning_rate(0.01);
  sgd.step({p.view()});
  check_close(p.value, {1.0 - 0.1 - 0.01}, "after two rates");
  CHECK(sgd.learning_rate() == 0.01);
}

TEST_CASE("SGD rejects invalid hyperparameters, naming the value", "[sgd]") {
  SGDOptions o;
  o.lr = -0.1;
  CHECK_THROWS_WITH(SGD(o), Catch::Contains("lr") && Catch::Contains("-0.1"));
  o = SGDOptions{};
  o.momentum = -0.5;
  CHECK_THROWS_WITH(SGD(o), Catch::Contains("momentum") && Catch::Contains("-0.5"));
  o = SGDOptions{};
  o.weight_decay = -1;
  CHECK_THROWS_WITH(SGD(o), Catch::Contains("weight_decay") && Catch::Contains("-1"));
  o = SGDOptions{};
  o.nesterov = true;
  CHECK_THROWS_WITH(SGD(o), Catch::Contains("nesterov") && Catch::Contains("momentum 0"));
  o.momentum = 0.9;
  o.dampening = 0.1;
  CHECK_THROWS_WITH(SGD(o), Catch::Contains("nesterov") && Catch::Contains("dampening 0.1"));
  SGD sgd(SGDOptions{});
  CHECK_THROWS_WITH(sgd.set_learning_rate(-2), Catch::Contains("-2"));
  CHECK_THROWS_AS(sgd.set_learning_rate(std::nan("")), Error);
  CHECK(sgd.learning_rate() == 1e-3);
}

}  // namespace
}  // namespace herd
