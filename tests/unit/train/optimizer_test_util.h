// Helpers for the optimizer tests: a parameter that owns its memory, and a
// check that float results match a double reference within float rounding.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/optimizer.h"

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
