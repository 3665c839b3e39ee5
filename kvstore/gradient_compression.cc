#include "kvstore/gradient_compression.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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
// the gradient, then gives up +t or -t when it reached it. Written as
// selects, as the word kernels below compute them four lanes at a time; a
// kept residual is the sum itself (r + 0 would turn -0 into +0).
inline uint8_t quantize_one_2bit(float threshold, float grad, float* residual) {
  const float r = *residual + grad;
  const bool pos = r >= threshold;
  const bool neg = r <= -threshold;
  *residual = pos ? r - threshold : (neg ? r + threshold : r);
  return static_cast<uint8_t>(pos ? 3 : (neg ? 2 : 0));
}

// Upstream subtracts 1 or adds 1 whatever the threshold: the 1bit codes
// carry +1 and -1.
inline uint8_t quantize_one_1bit(float threshold, float grad, float* residual) {
  const float r = *residual + grad;
  const bool bit = r > threshold;
  *residual = bit ? r - 1.0f : r + 1.0f;
  return static_cast<uint8_t>(bit);
}

#if defined(__SSE2__)
// Bit j of a 4-lane compare's mask (lane j holds value j of a byte's four)
// moved to bit 6 - 2j: the low bit of value j's 2bit code.
constexpr uint8_t spread_lanes(int mask) {
  uint8_t byte = 0;
  for (int j = 0; j < 4; ++j) byte = static_cast<uint8_t>(byte | ((mask >> j) & 1) << (6 - 2 * j));
  return byte;
}
// Bit j moved to bit 3 - j: lane j is the j-th most significant of a nibble.
constexpr uint8_t reverse_lanes(int mask) {
  uint8_t nibble = 0;
  for (int j = 0; j < 4; ++j) nibble = static_cast<uint8_t>(nibble | ((mask >> j) & 1) << (3 - j));
  return nibble;
}
template <uint8_t (*F)(int)>
struct LaneTable {
  uint8_t at[16];
  constexpr LaneTable() : at() {
    for (int m = 0; m < 16; ++m) at[m] = F(m);
  }
};
constexpr LaneTable<spread_lanes> kSpread;
constexpr LaneTable<reverse_lanes> kReverse;

// a where mask, else b.
inline __m128 select(__m128 mask, __m128 a, __m128 b) {
  return _mm_or_ps(_mm_and_ps(mask, a), _mm_andnot_ps(mask, b));
}

// The rules of quantize_one_2bit and quantize_one_1bit on four lanes at once:
// the same float32 operations and selects, so the same bits.
void quantize_word_2bit(float threshold, const float* grad, float* residual, uint8_t* out) {
  const __m128 pos_t = _mm_set1_ps(threshold);
  const __m128 neg_t = _mm_set1_ps(-threshold);
  for (int b = 0; b < 4; ++b) {
    const __m128 r = _mm_add_ps(_mm_loadu_ps(residual + 4 * b), _mm_loadu_ps(grad + 4 * b));
    const __m128 pos = _mm_cmpge_ps(r, pos_t);
    const __m128 neg = _mm_cmple_ps(r, neg_t);
    const __m128 kept = select(neg, _mm_add_ps(r, pos_t), r);
    _mm_storeu_ps(residual + 4 * b, select(pos, _mm_sub_ps(r, pos_t), kept));
    const int pos_mask = _mm_movemask_ps(pos);
    const int sent_mask = pos_mask | _mm_movemask_ps(neg);
    // 11 for +t, 10 for -t: the high bit says sent, the low bit positive.
    out[b] = static_cast<uint8_t>(kSpread.at[sent_mask] << 1 | kSpread.at[pos_mask]);
  }
}

void quantize_word_1bit(float threshold, const float* grad, float* residual, uint8_t* out) {
  const __m128 t = _mm_set1_ps(threshold);
  const __m128 one = _mm_set1_ps(1.0f);
  for (int b = 0; b < 4; ++b) {
    int nibbles[2];
    for (int h = 0; h < 2; ++h) {
      const int i = 8 * b + 4 * h;
      const __m128 r = _mm_add_ps(_mm_loadu_ps(residual + i), _mm_loadu_ps(grad + i));
      const __m128 bit = _mm_cmpgt_ps(r, t);
      _mm_storeu_ps(residual + i, select(bit, _mm_sub_ps(r, one), _mm_add_ps(r, one)));
      nibbles[h] = kReverse.at[_mm_movemask_ps(bit)];
    }
    out[b] = static_cast<uint8_t>(nibbles[0] << 4 | nibbles[1]);
  }
}
#else
void quantize_word_2bit(float threshold, const float* grad, float* residual, uint8_t* out) {
  for (int b = 0; b < 4; ++b) {
    uint8_t byte = 0;
    for (int k = 0; k < 4; ++k) {
      const int i = 4 * b + k;
      byte = static_cast<uint8_t>(byte | quantize_one_2bit(threshold, grad[i], residual + i)
                                             << shift_2bit(k));
    }
    out[b] = byte;
  }
}

void quantize_word_1bit(float threshold, const float* grad, float* residual, uint8_t* out) {
  for (int b = 0; b < 4; ++b) {
    uint8_t byte = 0;
    for (int k = 0; k < 8; ++k) {
      const int i = 8 * b + k;
      byte = static_cast<uint8_t>(byte | quantize_one_1bit(threshold, grad[i], residual + i)
                                             << (7 - k));
    }
    out[b] = byte;
  }
}
#endif

// Whole words through the word kernels, then the last values one at a time
// into zeroed bytes.
void quantize_2bit(float threshold, const float* grad, float* residual, int64_t n, uint8_t* codes) {
  const int64_t full_words = n / kValuesPerWord2Bit;
  for (int64_t w = 0; w < full_words; ++w) {
    const int64_t i = w * kValuesPerWord2Bit;
    quantize_word_2bit(threshold, grad + i, residual + i, codes + w * kWordBytes);
  }
  const int64_t total_bytes = ceil_div(n, kValuesPerWord2Bit) * kWordBytes;
  const int64_t done_bytes = full_words * kWordBytes;
  std::memset(codes + done_bytes, 0, static_cast<size_t>(total_bytes - done_bytes));
  for (int64_t i = full_words * kValuesPerWord2Bit; i < n; ++i) {
    codes[i / kValuesPerByte2Bit] |= static_cast<uint8_t>(
        quantize_one_2bit(threshold, grad[i], residual + i) << shift_2bit(i % kValuesPerByte2Bit));
  }
}

void quantize_1bit(float threshold, const float* grad, float* residual, int64_t n, uint8_t* codes) {
  const int64_t full_words = n / kValuesPerWord1Bit;
  for (int64_t w = 0; w < full_words; ++w) {
    const int64_t i = w * kValuesPerWord1Bit;
    quantize_word_1bit(threshold, grad + i, residual + i, codes + w * kWordBytes);
  }
  const int64_t total_bytes = ceil_div(n, kValuesPerWord1Bit) * kWordBytes;
  const int64_t done_bytes = full_words * kWordBytes;
  std::memset(codes + done_bytes, 0, static_cast<size_t>(total_bytes - done_bytes));
  for (int64_t i = full_words * kValuesPerWord1Bit; i < n; ++i) {
    codes[i / kValuesPerByte1Bit] |= static_cast<uint8_t>(
        quantize_one_1bit(threshold, grad[i], residual + i) << (7 - i % kValuesPerByte1Bit));
  }
}

// The values of every possible byte of codes, so that a byte decodes with
// one lookup and its 4 (2bit) or 8 (1bit) values are copied or added as a
// block (with SSE2, four lanes at a time).
template <int kPerByte>
class ByteTable {
 public:
  template <typename ValueOf>
  explicit ByteTable(ValueOf value_of) {
    for (int byte = 0; byte < 256; ++byte) {
      for (int slot = 0; slot < kPerByte; ++slot) table_[byte][slot] = value_of(byte, slot);
    }
  }
  const float* values(uint8_t byte) const { return table_[byte]; }

 private:
  alignas(32) float table_[256][kPerByte];
};

using Table2Bit = ByteTable<kValuesPerByte2Bit>;
using Table1Bit = ByteTable<kValuesPerByte1Bit>;

// 11 is +t, 10 is -t, 00 and 01 are 0.
Table2Bit table_2bit(float threshold) {
  return Table2Bit([threshold](int byte, int slot) {
    const int code = (byte >> shift_2bit(slot)) & 3;
    return code == 3 ? threshold : (code == 2 ? -threshold : 0.0f);
  });
}

Table1Bit table_1bit() {
  return Table1Bit([](int byte, int slot) { return (byte >> (7 - slot)) & 1 ? 1.0f : -1.0f; });
}

// Apply(out_i, value_i) for every value.
template <int kPerByte, typename Apply>
void decode(const ByteTable<kPerByte>& table, const uint8_t* codes, int64_t n, float* out,
            Apply apply) {
  const int64_t full_bytes = n / kPerByte;
  for (int64_t b = 0; b < full_bytes; ++b) {
    const float* v = table.values(codes[b]);
    float* o = out + b * kPerByte;
#if defined(__SSE2__)
    for (int slot = 0; slot < kPerByte; slot += 4) {
      _mm_storeu_ps(o + slot, apply(_mm_loadu_ps(o + slot), _mm_load_ps(v + slot)));
    }
#else
    for (int slot = 0; slot < kPerByte; ++slot) apply(o[slot], v[slot]);
#endif
  }
  const int64_t tail = n - full_bytes * kPerByte;
  if (tail > 0) {
    const float* v = table.values(codes[full_bytes]);
    float* o = out + full_bytes * kPerByte;
    for (int64_t slot = 0; slot < tail; ++slot) apply(o[slot], v[slot]);
  }
}

// `run` called with the table of `params`' type.
template <typename Run>
void with_table(const CompressionParams& params, Run run) {
  if (params.type == CompressionType::k2Bit) {
    run(table_2bit(params.threshold));
  } else {
    run(table_1bit());
  }
}

// The two ways of applying a decoded value (or four lanes of them: the same
// float32 operations).
struct Assign {
  void operator()(float& o, float v) const { o = v; }
#if defined(__SSE2__)
  __m128 operator()(__m128 /*o*/, __m128 v) const { return v; }
#endif
};
// As a server that dequantizes a push into a buffer and adds the buffer:
// 00 codes add +0.0f too.
struct Add {
  void operator()(float& o, float v) const { o += v; }
#if defined(__SSE2__)
  __m128 operator()(__m128 o, __m128 v) const { return _mm_add_ps(o, v); }
#endif
};

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
  with_table(params, [&](const auto& table) { decode(table, codes, n, out, Assign()); });
}

void dequantize_add(const CompressionParams& params, const uint8_t* codes, int64_t n, float* sum) {
  check_type("dequantize_add", params.type);
  check_count("dequantize_add", n);
  with_table(params, [&](const auto& table) { decode(table, codes, n, sum, Add()); });
}

void dequantize_sum(const CompressionParams& params, const uint8_t* const* codes, int count,
                    int64_t n, float* sum) {
  check_type("dequantize_sum", params.type);
  check_count("dequantize_sum", n);
  if (count < 1) {
    throw Error(fmt::format("gradient compression: dequantize_sum of {} code arrays", count));
  }
  const int64_t per_byte =
      params.type == CompressionType::k2Bit ? kValuesPerByte2Bit : kValuesPerByte1Bit;
  // Blocks of whole bytes small enough to stay in the first-level cache
  // while every array adds into them: one pass over `sum` instead of count.
  constexpr int64_t kBlockValues = 2048;
  with_table(params, [&](const auto& table) {
    for (int64_t begin = 0; begin < n; begin += kBlockValues) {
      const int64_t values = std::min(kBlockValues, n - begin);
      const int64_t offset = begin / per_byte;
      float* out = sum + begin;
      decode(table, codes[0] + offset, values, out, Assign());
      for (int k = 1; k < count; ++k) decode(table, codes[k] + offset, values, out, Add());
    }
  });
}

}  // namespace kv
}  // namespace herd
