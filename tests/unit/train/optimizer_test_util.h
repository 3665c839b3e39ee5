// Helpers for the optimizer and checkpoint tests: a parameter that owns its
// memory, a two-parameter model with a step-dependent gradient, a bitwise
// comparison, and a check that float results match a double reference
// within float rounding.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/train/optimizer.h"

namespace herd::test {

struct OwnedParam {
  std::string name;
  std::vector<float> value;
  std::vector<float> grad;

  OwnedParam(std::string n, std::vector<float> v)
      : name(std::move(n)), value(std::move(v)), grad(value.size(), 0.0f) {}
  Parameter view() {
    return Parameter(name, value.data(), grad.data(), static_cast<int64_t>(value.size()));
  }
};

// Two parameters of a toy layer whose gradient depends on the weights and the
// step, as a real one does, so that a resumed run that lost any state would
// diverge.
struct TinyModel {
  OwnedParam weight{"fc1.weight", {0.5f, -0.25f, 1.5f, 2.0f, -3.0f, 0.125f}};
  OwnedParam bias{"fc1.bias", {0.1f, -0.2f}};
  std::vector<Parameter> params() { return {weight.view(), bias.view()}; }
  void fill_grads(int step) {
    for (std::size_t i = 0; i < weight.value.size(); ++i) {
      weight.grad[i] = 0.3f * weight.value[i] - 0.01f * static_cast<float>(step * (i + 1));
    }
    for (std::size_t i = 0; i < bias.value.size(); ++i) {
      bias.grad[i] = bias.value[i] + 0.05f * static_cast<float>(step);
    }
  }
  // Steps first..last (inclusive): fill_grads(step), then an optimizer step.
  void train(Optimizer& optimizer, int first, int last) {
    for (int step = first; step <= last; ++step) {
      fill_grads(step);
      optimizer.step(params());
    }
  }
};

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  // memcmp must not see an empty vector's data(), which may be null.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// Each element of `actual` within a relative 1e-5 (absolute 1e-7 near zero)
// of the double reference: a few float roundings per step, over a few steps.
inline void check_close(const std::vector<float>& actual, const std::vector<double>& expected,
                        const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": expected " << expected[i] << ", got " << actual[i]);
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-7));
  }
}

}  // namespace herd::test
