// Helpers for the KVStore's unit tests: host arrays that own their floats,
// and a check that a call throws herd::Error with every given part in its
// message.
#pragma once

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/types.h"

namespace herd::kv::test {

// A float32 array of `shape`, every element `fill`.
struct Array {
  std::vector<int64_t> shape;
  std::vector<float> values;

  Array(std::vector<int64_t> s, float fill) : shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t extent : shape) n *= extent;
    values.assign(static_cast<std::size_t>(n), fill);
  }
  TensorView view() { return TensorView{values.data(), DataType::kFloat32, shape}; }
};

inline std::vector<int64_t> shape23() { return {2, 3}; }

// Every element of `array` equals `expected` exactly.
inline void check_all(const Array& array, float expected, const std::string& what) {
  for (std::size_t i = 0; i < array.values.size(); ++i) {
    INFO(what << " element " << i);
    REQUIRE(array.values[i] == expected);
  }
}

template <typename Call>
void check_throws_with(Call call, const std::vector<std::string>& parts) {
  try {
    call();
    FAIL("no herd::Error thrown; expected one naming " << parts.front());
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts) {
      INFO("message: " << message);
      CHECK(message.find(part) != std::string::npos);
    }
  }
}

}  // namespace herd::kv::test
