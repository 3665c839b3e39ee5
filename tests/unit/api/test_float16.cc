// include/herd/float16.h against IEEE-754 binary16 encodings worked out by
// hand: 1 sign bit, 5 exponent bits (bias 15), 10 mantissa bits; the
// subnormals count in units of 2^-24.
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/float16.h"

namespace {

uint16_t to_half(float value) {
  uint16_t bits = 0;
  herd::float_to_float16(&value, &bits, 1);
  return bits;
}

float from_half(uint16_t bits) {
  float value = 0;
  herd::float16_to_float(&bits, &value, 1);
  return value;
}

}  // namespace

TEST_CASE("float_to_float16 encodes exact values") {
  CHECK(to_half(0.0f) == 0x0000);
  CHECK(to_half(-0.0f) == 0x8000);
  CHECK(to_half(1.0f) == 0x3c00);                      // exponent 15, mantissa 0
  CHECK(to_half(-2.0f) == 0xc000);                     // sign, exponent 16
  CHECK(to_half(65504.0f) == 0x7bff);                  // the largest finite
  CHECK(to_half(std::ldexp(1.0f, -14)) == 0x0400);     // the smallest normal
  CHECK(to_half(std::ldexp(1.0f, -24)) == 0x0001);     // the smallest subnormal
  CHECK(to_half(std::ldexp(1023.0f, -24)) == 0x03ff);  // the largest subnormal
}

TEST_CASE("float_to_float16 rounds to nearest, ties to even") {
  // 1 + 2^-11 lies halfway between 1 (mantissa 0, even) and 1 + 2^-10.
  CHECK(to_half(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);
  // 1 + 3 * 2^-11 lies halfway between mantissas 1 and 2: up to the even 2.
  CHECK(to_half(1.0f + std::ldexp(3.0f, -11)) == 0x3c02);
  // Just above the first tie: up.
  CHECK(to_half(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)) == 0x3c01);
  // Subnormal ties: half a unit to 0, one and a half units to 2.
  CHECK(to_half(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(to_half(std::ldexp(3.0f, -25)) == 0x0002);
  // 65520 is halfway between 65504 and 2^16, whose mantissa is even: infinity.
  CHECK(to_half(65520.0f) == 0x7c00);
  CHECK(to_half(65519.0f) == 0x7bff);
}

TEST_CASE("float_to_float16 keeps infinities and NaN") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(to_half(inf) == 0x7c00);
  CHECK(to_half(-inf) == 0xfc00);
  CHECK(to_half(1e10f) == 0x7c00);
  const uint16_t nan = to_half(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
}

TEST_CASE("float16_to_float decodes exactly") {
  CHECK(from_half(0x3c00) == 1.0f);
  CHECK(from_half(0xc000) == -2.0f);
  CHECK(from_half(0x7bff) == 65504.0f);
  CHECK(from_half(0x3555) == 1365.0f / 4096.0f);  // 2^-2 * (1 + 341/1024)
  CHECK(from_half(0x0001) == std::ldexp(1.0f, -24));
  CHECK(from_half(0x03ff) == std::ldexp(1023.0f, -24));
  CHECK(std::signbit(from_half(0x8000)));
  CHECK(from_half(0x8000) == 0.0f);
  CHECK(from_half(0xfc00) == -std::numeric_limits<float>::infinity());
  CHECK(std::isnan(from_half(0x7e00)));
}

TEST_CASE("the array forms convert every element and round-trip every float16") {
  // Every finite float16 and the infinities decode to a float that encodes
  // back to the same bits.
  std::vector<uint16_t> bits;
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    if ((b & 0x7c00) == 0x7c00 && (b & 0x03ff) != 0) continue;  // NaN payloads may change
    bits.push_back(static_cast<uint16_t>(b));
  }
  std::vector<float> values(bits.size());
  std::vector<uint16_t> back(bits.size());
  herd::float16_to_float(bits.data(), values.data(), static_cast<int64_t>(bits.size()));
  herd::float_to_float16(values.data(), back.data(), static_cast<int64_t>(values.size()));
  CHECK(back == bits);
  // A count of 0 touches nothing.
  uint16_t untouched = 0x1234;
  herd::float_to_float16(values.data(), &untouched, 0);
  CHECK(untouched == 0x1234);
}
