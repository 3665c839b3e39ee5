// A scalar reference of MXNet's 2-bit and 1-bit gradient compression for the
// tests, written from the description of the rules and the layout
// (docs/kvstore.md), independently of kvstore/gradient_compression.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvstore/gradient_compression.h"

namespace herd {
namespace kv {
namespace test {

using Bytes = std::vector<uint8_t>;

// The reference: each element's code first, then its place in the words.
// 2bit: word i / 16; inside it, byte (i % 16) / 4 and, inside that, slot
// i % 4 from the most significant pair down. 1bit: word i / 32, byte
// (i % 32) / 8, bit 7 - i % 8.
struct Reference {
  Bytes codes;
  std::vector<float> dequantized;
};

// One quantize step: `residual` takes `grad` and keeps what the codes leave.

inline Reference reference_quantize(const CompressionParams& p, const std::vector<float>& grad,
                                    std::vector<float>& residual) {
  const size_t n = grad.size();
  const bool two = p.type == CompressionType::k2Bit;
  const size_t per_word = two ? 16 : 32;
  Reference ref;
  ref.codes.assign((n + per_word - 1) / per_word * 4, 0);
  ref.dequantized.assign(n, 0.0f);
  for (size_t i = 0; i < n; ++i) {
    const float sum = residual[i] + grad[i];
    const size_t word = i / per_word;
    const size_t in_word = i % per_word;
    if (two) {
      const float t = p.threshold;
      unsigned code = 0;
      float value = 0.0f;
      if (sum >= t) {
        code = 3;
        value = t;
      } else if (sum <= -t) {
        code = 2;
        value = -t;
      }
      residual[i] = code == 0 ? sum : sum - value;
      ref.dequantized[i] = value;
      const size_t byte = word * 4 + in_word / 4;
      ref.codes[byte] = static_cast<uint8_t>(ref.codes[byte] | code << (2 * (3 - in_word % 4)));
    } else {
      const bool bit = sum > p.threshold;
      residual[i] = bit ? sum - 1.0f : sum + 1.0f;
      ref.dequantized[i] = bit ? 1.0f : -1.0f;
      const size_t byte = word * 4 + in_word / 8;
      if (bit) ref.codes[byte] = static_cast<uint8_t>(ref.codes[byte] | 0x80u >> (in_word % 8));
    }
  }
  return ref;
}

}  // namespace test
}  // namespace kv
}  // namespace herd
