#include "kvstore/gradient_compression.h"

#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "herd/error.h"

namespace herd {
namespace kv {

namespace {

// Values per byte and per float32-sized word of the codes.
constexpr int64_t kValuesPerByte2Bit = 4;
constexpr int64_t kValuesPerWord2Bit = 16;
constexpr int64_t kValuesPerByte1Bit = 8;
constexpr int64_t kValuesPerWord1Bit = 32;
constexpr int64_t kWordBytes = 4;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

void check_count(const char* what, int64_t n) {
  if (n < 0) throw Error(fmt::format("gradient compression: {} of {} values", what, n));
}

void check_type(const char* what, CompressionType type) {
  if (type == CompressionType::kNone) {
    throw Error(fmt::format(
        "gradient compression: {} needs type \"2bit\" or \"1bit\", got \"none\"", what));
  }
}

// 2bit: the code of value i sits in byte i / 4, in bits 7-6 for i % 4 == 0
// down to bits 1-0 for i % 4 == 3. 11 is +t, 10 is -t, 00 (and 01) is 0.
constexpr int shift_2bit(int64_t slot) { return 6 - 2 * static_cast<int>(slot); }

// One element of the 2bit rule, in float32 as upstream: the residual takes
// the gradient, then gives up +t or -t when it reached it.
inline uint8_t quantize_one_2bit(float threshold, float grad, float* residual) {
  float r = *residual + grad;
  uint8_t code = 0;
  if (r >= threshold) {
    code = 3;
    r -= threshold;
  } else if (r <= -threshold) {
    code = 2;
    r += threshold;
  }
  *residual = r;
  return code;
}

// Upstream subtracts 1 or adds 1 whatever the threshold: the 1bit codes
// carry +1 and -1.
inline uint8_t quantize_one_1bit(float threshold, float grad, float* residual) {
  float r = *residual + grad;
  uint8_t bit = 0;
  if (r > threshold) {
    bit = 1;
    r -= 1.0f;
  } else {
    r += 1.0f;
  }
  *residual = r;
  return bit;
}

void quantize_2bit(float threshold, const float* grad, float* residual, int64_t n, uint8_t* codes) {
  const int64_t full_bytes = n / kValuesPerByte2Bit;
  // Whole bytes: four values each, no bounds to test inside.
  for (int64_t b = 0; b < full_bytes; ++b) {
    const int64_t i = b * kValuesPerByte2Bit;
    uint8_t byte = 0;
    for (int64_t slot = 0; slot < kValuesPerByte2Bit; ++slot) {
      byte |= static_cast<uint8_t>(quantize_one_2bit(threshold, grad[i + slot], residual + i + slot)
                                   << shift_2bit(slot));
    }
    codes[b] = byte;
  }
  const int64_t total_bytes = ceil_div(n, kValuesPerWord2Bit) * kWordBytes;
  std::memset(codes + full_bytes, 0, static_cast<size_t>(total_bytes - full_bytes));
  for (int64_t i = full_bytes * kValuesPerByte2Bit; i < n; ++i) {
    codes[full_bytes] |= static_cast<uint8_t>(quantize_one_2bit(threshold, grad[i], residual + i)
                                              << shift_2bit(i % kValuesPerByte2Bit));
  }
}

void quantize_1bit(float threshold, const float* grad, float* residual, int64_t n, uint8_t* codes) {
  const int64_t full_bytes = n / kValuesPerByte1Bit;
  for (int64_t b = 0; b < full_bytes; ++b) {
    const int64_t i = b * kValuesPerByte1Bit;
    uint8_t byte = 0;
    for (int64_t slot = 0; slot < kValuesPerByte1Bit; ++slot) {
      byte |= static_cast<uint8_t>(quantize_one_1bit(threshold, grad[i + slot], residual + i + slot)
                                   << (7 - slot));
    }
    codes[b] = byte;
  }
  const int64_t total_bytes = ceil_div(n, kValuesPerWord1Bit) * kWordBytes;
  std::memset(codes + full_bytes, 0, static_cast<size_t>(total_bytes - full_bytes));
  for (int64_t i = full_bytes * kValuesPerByte1Bit; i < n; ++i) {
    codes[full_bytes] |= static_cast<uint8_t>(quantize_one_1bit(threshold, grad[i], residual + i)
                                              << (7 - i % kValuesPerByte1Bit));
  }
}

// Apply(out_i, value_i) for every value: the codes decoded through a table of
// the four 2bit values (two for 1bit), a byte at a time.
template <typename Apply>
void decode_2bit(float threshold, const uint8_t* codes, int64_t n, float* out, Apply apply) {
  const float values[4] = {0.0f, 0.0f, -threshold, threshold};
  const int64_t full_bytes = n / kValuesPerByte2Bit;
  for (int64_t b = 0; b < full_bytes; ++b) {
    const uint8_t byte = codes[b];
    float* o = out + b * kValuesPerByte2Bit;
    apply(o[0], values[(byte >> 6) & 3]);
    apply(o[1], values[(byte >> 4) & 3]);
    apply(o[2], values[(byte >> 2) & 3]);
    apply(o[3], values[byte & 3]);
  }
  for (int64_t i = full_bytes * kValuesPerByte2Bit; i < n; ++i) {
    apply(out[i], values[(codes[full_bytes] >> shift_2bit(i % kValuesPerByte2Bit)) & 3]);
  }
}

template <typename Apply>
void decode_1bit(const uint8_t* codes, int64_t n, float* out, Apply apply) {
  const float values[2] = {-1.0f, 1.0f};
  const int64_t full_bytes = n / kValuesPerByte1Bit;
  for (int64_t b = 0; b < full_bytes; ++b) {
    const uint8_t byte = codes[b];
    float* o = out + b * kValuesPerByte1Bit;
    for (int slot = 0; slot < kValuesPerByte1Bit; ++slot) {
      apply(o[slot], values[(byte >> (7 - slot)) & 1]);
    }
  }
  for (int64_t i = full_bytes * kValuesPerByte1Bit; i < n; ++i) {
    apply(out[i], values[(codes[full_bytes] >> (7 - i % kValuesPerByte1Bit)) & 1]);
  }
}

template <typename Apply>
void decode(const CompressionParams& params, const uint8_t* codes, int64_t n, float* out,
            Apply apply) {
  if (params.type == CompressionType::k2Bit) {
    decode_2bit(params.threshold, codes, n, out, apply);
  } else {
    decode_1bit(codes, n, out, apply);
  }
}

}  // namespace

CompressionParams parse_compression(const std::string& type, double threshold) {
  CompressionParams params;
  if (type == "none") return params;
  if (type == "2bit") {
    params.type = CompressionType::k2Bit;
  } else if (type == "1bit") {
    params.type = CompressionType::k1Bit;
  } else {
    throw Error(fmt::format(
        "gradient compression: unknown type \"{}\" (known: \"2bit\", \"1bit\", \"none\")", type));
  }
  // The codes are computed in float32: the threshold must stay finite there.
  const float t = static_cast<float>(threshold);
  if (!std::isfinite(t)) {
    throw Error(
        fmt::format("gradient compression: threshold {} of type \"{}\" is not a finite float32",
                    threshold, type));
  }
  if (params.type == CompressionType::k2Bit && !(t > 0.0f)) {
    throw Error(fmt::format(
        "gradient compression: threshold {} of type \"2bit\" must be greater than 0 in float32",
        threshold));
  }
  params.threshold = t;
  return params;
}

std::string to_string(CompressionType type) {
  switch (type) {
    case CompressionType::kNone: return "none";
    case CompressionType::k2Bit: return "2bit";
    case CompressionType::k1Bit: return "1bit";
  }
  return "unknown";
}

int64_t compressed_bytes(CompressionType type, int64_t n) {
  check_count("compressed_bytes", n);
  switch (type) {
    case CompressionType::kNone: return n * 4;
    case CompressionType::k2Bit: return ceil_div(n, kValuesPerWord2Bit) * kWordBytes;
    case CompressionType::k1Bit: return ceil_div(n, kValuesPerWord1Bit) * kWordBytes;
  }
  return n * 4;
}

void quantize(const CompressionParams& params, const float* grad, float* residual, int64_t n,
              uint8_t* codes) {
  check_type("quantize", params.type);
  check_count("quantize", n);
  if (params.type == CompressionType::k2Bit) {
    quantize_2bit(params.threshold, grad, residual, n, codes);
  } else {
    quantize_1bit(params.threshold, grad, residual, n, codes);
  }
}

void dequantize(const CompressionParams& params, const uint8_t* codes, int64_t n, float* out) {
  check_type("dequantize", params.type);
  check_count("dequantize", n);
  decode(params, codes, n, out, [](float& o, float v) { o = v; });
}

void dequantize_add(const CompressionParams& params, const uint8_t* codes, int64_t n, float* sum) {
  check_type("dequantize_add", params.type);
  check_count("dequantize_add", n);
  // As a server that dequantizes a push into a buffer and adds the buffer:
  // 00 codes add +0.0f too.
  decode(params, codes, n, sum, [](float& s, float v) { s += v; });
}

}  // namespace kv
}  // namespace herd
