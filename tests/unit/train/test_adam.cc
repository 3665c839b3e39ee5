// herd::Adam and AdamW against torch.optim.Adam's and AdamW's documented
// algorithms, recomputed here in double, and against numbers worked out by
// hand.
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

// The documented algorithm, with the bias-corrected moments written out
// (m_hat, v_hat) rather than folded into the step size as the optimizer does.
std::vector<std::vector<double>> adam_reference(std::vector<double> w,
                                                const std::vector<std::vector<double>>& grads,
                                                const AdamOptions& o) {
  std::vector<double> m(w.size(), 0.0), v(w.size(), 0.0);
  std::vector<std::vector<double>> history;
  for (std::size_t step = 1; step <= grads.size(); ++step) {
    const double t = static_cast<double>(step);
    for (std::size_t i = 0; i < w.size(); ++i) {
      double g = grads[step - 1][i];
      if (o.decoupled_weight_decay) {
        w[i] -= o.lr * o.weight_decay * w[i];
      } else {
        g += o.weight_decay * w[i];
      }
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(o.beta1, t));
      const double v_hat = v[i] / (1 - std::pow(o.beta2, t));
      w[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
    history.push_back(w);
  }
  return history;
}

const std::vector<float> kStart = {0.5f, -1.25f, 2.0f, 0.0f};
const std::vector<std::vector<double>> kGrads = {
    {0.1, -0.2, 0.3, 0.0}, {-0.4, 0.5, 0.25, 1e-3}, {0.75, 0.125, -1.5, -2.0}};

void check_against_reference(const AdamOptions& options) {
  OwnedParam p("layer.weight", kStart);
  Adam adam(options);
  const auto expected =
      adam_reference(std::vector<double>(kStart.begin(), kStart.end()), kGrads, options);
  for (std::size_t t = 0; t < kGrads.size(); ++t) {
    for (std::size_t i = 0; i < kStart.size(); ++i) p.grad[i] = static_cast<float>(kGrads[t][i]);
    adam.step({p.view()});
    check_close(p.value, expected[t], "step " + std::to_string(t + 1));
  }
}

TEST_CASE("Adam by hand: the first step moves every weight by about lr", "[adam]") {
  // Step 1: m = (1 - b1) g, v = (1 - b2) g^2, so m_hat = g and v_hat = g^2 and
  // w <- w - lr * g / (|g| + eps): a step of lr * |g| / (|g| + eps).
  // Step 2 with the same g: m_hat = g and v_hat = g^2 again, the same step.
  OwnedParam p("w", {1.0f, -1.0f});
  AdamOptions o;
  o.lr = 0.01;
  o.eps = 1e-2;
  Adam adam(o);
  p.grad = {0.5f, -2.0f};
  adam.step({p.view()});
  check_close(p.value, {1.0 - 0.01 * 0.5 / 0.51, -1.0 + 0.01 * 2.0 / 2.01}, "step 1");
  adam.step({p.view()});
  check_close(p.value, {1.0 - 0.02 * 0.5 / 0.51, -1.0 + 0.02 * 2.0 / 2.01}, "step 2");
  const OptimizerState state = adam.export_state();
  REQUIRE(state.buffers.size() == 2);
  CHECK(state.buffers[0].name == "w/exp_avg");
  CHECK(state.buffers[1].name == "w/exp_avg_sq");
  // m = 0.9 * 0.1 g + 0.1 g = 0.19 g; v = 0.999 * 0.001 g^2 + 0.001 g^2.
  check_close(state.buffers[0].values, {0.19 * 0.5, 0.19 * -2.0}, "exp_avg");
  check_close(state.buffers[1].values, {0.001999 * 0.25, 0.001999 * 4.0}, "exp_avg_sq");
  CHECK(state.step == 2);
}

TEST_CASE("AdamW by hand: decay scales the weight before the Adam step", "[adam]") {
  // lr 0.1, weight_decay 0.5, g = 0 at w = 2: m = v = 0 so the Adam part is 0
  // and only the decay acts: w <- w * (1 - 0.05) each step.
  OwnedParam p("w", {2.0f});
  AdamOptions o;
  o.lr = 0.1;
  o.weight_decay = 0.5;
  o.decoupled_weight_decay = true;
  Adam adamw(o);
  adamw.step({p.view()});
  check_close(p.value, {1.9}, "step 1");
  adamw.step({p.view()});
  check_close(p.value, {1.805}, "step 2");
}

TEST_CASE("Adam and AdamW follow torch's algorithms", "[adam]") {
  AdamOptions o;
  o.lr = 0.01;
  SECTION("defaults") { check_against_reference(o); }
  SECTION("other betas and eps") {
    o.beta1 = 0.5;
    o.beta2 = 0.75;
    o.eps = 1e-3;
    check_against_reference(o);
  }
  SECTION("beta1 = 0") {
    o.beta1 = 0;
    check_against_reference(o);
  }
  SECTION("coupled weight decay (Adam)") {
    o.weight_decay = 0.1;
    check_against_reference(o);
  }
  SECTION("decoupled weight decay (AdamW)") {
    o.weight_decay = 0.1;
    o.decoupled_weight_decay = true;
    check_against_reference(o);
  }
}

TEST_CASE("Adam rejects invalid hyperparameters, naming the value", "[adam]") {
  auto with = [](auto change) {
    AdamOptions o;
    change(o);
    return o;
  };
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.lr = -1; })), Catch::Contains("lr -1"));
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.beta1 = 1; })),
                    Catch::Contains("beta1") && Catch::Contains(" 1 "));
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.beta1 = -0.1; })),
                    Catch::Contains("beta1") && Catch::Contains("-0.1"));
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.beta2 = 1.5; })),
                    Catch::Contains("beta2") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.eps = 0; })),
                    Catch::Contains("eps") && Catch::Contains(" 0 "));
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.eps = -1e-8; })),
                    Catch::Contains("eps") && Catch::Contains("-1e-08"));
  CHECK_THROWS_WITH(Adam(with([](AdamOptions& o) { o.weight_decay = -0.01; })),
                    Catch::Contains("weight_decay") && Catch::Contains("-0.01"));
  CHECK_THROWS_AS(Adam(with([](AdamOptions& o) { o.beta2 = std::nan(""); })), Error);
}

}  // namespace
}  // namespace herd
