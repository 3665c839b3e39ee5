// MXNet's 2-bit and 1-bit gradient compression with error feedback,
// bit-exact with upstream (docs/kvstore.md gives the rules and the layout).
//
// The sender keeps one float32 residual per compressed array (per key, per
// local device, per destination slice); quantize() adds the gradient into it,
// emits codes and keeps what the codes did not carry. Codes are packed into
// float32-sized words: 16 values per word for 2bit, 32 for 1bit, the tail bits
// zero. Pure functions: callable from any thread on distinct buffers.
#pragma once

#include <cstdint>
#include <string>

namespace herd {
namespace kv {

enum class CompressionType { kNone, k2Bit, k1Bit };

struct CompressionParams {
  CompressionType type = CompressionType::kNone;
  float threshold = 0.5f;
};

// Parses MXNet's ("2bit", 0.5); throws herd::Error naming the type or the
// threshold when invalid ("none" gives kNone).
CompressionParams parse_compression(const std::string& type, double threshold);
std::string to_string(CompressionType type);

// Bytes of the codes of n values: 4 * ceil(n / 16) for 2bit, 4 * ceil(n / 32)
// for 1bit; 4 * n (the float32 values themselves) for kNone.
int64_t compressed_bytes(CompressionType type, int64_t n);

// residual += grad; codes <- quantize(residual); residual -= dequantize(codes).
// `codes` holds compressed_bytes(type, n) bytes, all written. quantize and
// both dequantizes throw herd::Error for kNone or a negative n.
void quantize(const CompressionParams& params, const float* grad, float* residual, int64_t n,
              uint8_t* codes);

// out[i] = dequantized value i (2bit: +t, -t or 0; 1bit: +1 or -1).
void dequantize(const CompressionParams& params, const uint8_t* codes, int64_t n, float* out);
// sum[i] += dequantized value i.
void dequantize_add(const CompressionParams& params, const uint8_t* codes, int64_t n, float* sum);
// sum[i] = value i of codes[0] + value i of codes[1] + ... + of codes[count-1],
// added in that order in float32: the floats of dequantize followed by
// dequantize_add of each further array, in one pass over `sum`. count >= 1.
void dequantize_sum(const CompressionParams& params, const uint8_t* const* codes, int count,
                    int64_t n, float* sum);

}  // namespace kv
}  // namespace herd
