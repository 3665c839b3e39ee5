// ops/half.h against the ldexp/nearbyint reference in ops_reference.h:
// every 16-bit pattern one way, every rounding boundary the other way, plus
// the textbook values.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "ops/half.h"
#include "ops_reference.h"

namespace herd::ops {
namespace {

using testing::kBFloat16Format;
using testing::kBinary16;
using testing::ref_decode;
using testing::ref_encode;
using testing::ref_is_nan_bits;
using testing::SmallFloatFormat;

struct Converters {
  const char* name;
  SmallFloatFormat format;
  float (*to_float)(uint16_t);
  uint16_t (*from_float)(float);
  uint16_t quiet_bit;
  uint16_t largest_finite;
};

const Converters kFloat16Converters{"float16",         kBinary16, &float16_to_float,
                                    &float_to_float16, 0x0200,    0x7bff};
const Converters kBFloat16Converters{"bfloat16",         kBFloat16Format, &bfloat16_to_float,
                                     &float_to_bfloat16, 0x0040,          0x7f7f};

uint32_t bits_of(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

float float_of(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

// Every one of the 65536 patterns decodes to the reference value (sign of
// zero included) and encodes back to itself; NaNs stay NaN and come back
// quiet.
std::string check_every_pattern(const Converters& c) {
  int wrong = 0;
  std::string first;
  for (uint32_t pattern = 0; pattern <= 0xffffu; ++pattern) {
    const auto bits = static_cast<uint16_t>(pattern);
    const float widened = c.to_float(bits);
    const uint16_t back = c.from_float(widened);
    bool ok;
    if (ref_is_nan_bits(bits, c.format)) {
      ok = std::isnan(widened) && ref_is_nan_bits(back, c.format) && (back & c.quiet_bit) != 0 &&
           (back & 0x8000u) == (bits & 0x8000u);
    } else {
      const double expected = ref_decode(bits, c.format);
      ok = static_cast<double>(widened) == expected &&
           std::signbit(widened) == std::signbit(expected) && back == bits;
    }
    if (!ok && wrong++ == 0) {
      first = fmt::format(
          "{} pattern {:#06x}: widened {} (float bits {:#010x}), reference {}, back {:#06x}",
          c.name, bits, widened, bits_of(widened), ref_decode(bits, c.format), back);
    }
  }
  return wrong == 0 ? "" : fmt::format("{} patterns wrong; first: {}", wrong, first);
}

// For each pair of adjacent non-negative finite values lo < hi (and their
// negatives): the midpoint, which float32 holds exactly, rounds to the one
// with an even mantissa, and the floats just below and above it round to lo
// and hi. The last pair is (largest finite, infinity): its midpoint is where
// overflow to infinity begins.
std::string check_every_boundary(const Converters& c) {
  int wrong = 0;
  std::string first;
  const auto report = [&](float input, uint16_t expected, uint16_t actual) {
    if (wrong++ == 0) {
      first = fmt::format("{}: input {} (float bits {:#010x}) expected {:#06x}, actual {:#06x}",
                          c.name, input, bits_of(input), expected, actual);
    }
  };
  for (uint32_t lo = 0; lo <= c.largest_finite; ++lo) {
    const uint32_t hi = lo + 1;
    const double lo_value = ref_decode(static_cast<uint16_t>(lo), c.format);
    const double hi_value =
        hi == c.largest_finite + 1u
            ? lo_value + (lo_value - ref_decode(static_cast<uint16_t>(lo - 1), c.format))
            : ref_decode(static_cast<uint16_t>(hi), c.format);
    const auto midpoint = static_cast<float>((lo_value + hi_value) / 2);
    REQUIRE(static_cast<double>(midpoint) == (lo_value + hi_value) / 2);
    const uint32_t even = (lo % 2 == 0) ? lo : hi;
    for (uint32_t sign : {0u, 0x8000u}) {
      const float signed_mid = sign != 0 ? -midpoint : midpoint;
      const float toward_zero = std::nextafter(signed_mid, 0.0f);
      const float away = std::nextafter(signed_mid, sign != 0 ? -HUGE_VALF : HUGE_VALF);
      const std::pair<float, uint32_t> cases[] = {
          {signed_mid, even}, {toward_zero, lo}, {away, hi}};
      for (const auto& [input, magnitude] : cases) {
        const auto expected = static_cast<uint16_t>(sign | magnitude);
        const uint16_t actual = c.from_float(input);
        if (actual != expected) report(input, expected, actual);
      }
    }
  }
  return wrong == 0 ? "" : fmt::format("{} inputs wrong; first: {}", wrong, first);
}

// Random float bit patterns of every class (subnormal, huge, NaN payloads).
std::string check_random_floats(const Converters& c) {
  std::mt19937 rng(12345);
  int wrong = 0;
  std::string first;
  for (int i = 0; i < 1'000'000; ++i) {
    const float input = float_of(static_cast<uint32_t>(rng()));
    const uint16_t actual = c.from_float(input);
    bool ok;
    uint16_t expected = 0;
    if (std::isnan(input)) {
      ok = ref_is_nan_bits(actual, c.format) && (actual & c.quiet_bit) != 0 &&
           ((actual & 0x8000u) != 0) == std::signbit(input);
    } else {
      expected = ref_encode(input, c.format);
      ok = actual == expected;
    }
    if (!ok && wrong++ == 0) {
      first = fmt::format("{}: input {} (float bits {:#010x}) expected {:#06x}, actual {:#06x}",
                          c.name, input, bits_of(input), expected, actual);
    }
  }
  return wrong == 0 ? "" : fmt::format("{} inputs wrong; first: {}", wrong, first);
}

}  // namespace

TEST_CASE("float16: every pattern widens exactly and round-trips", "[half]") {
  CHECK(check_every_pattern(kFloat16Converters) == "");
}

TEST_CASE("bfloat16: every pattern widens exactly and round-trips", "[half]") {
  CHECK(check_every_pattern(kBFloat16Converters) == "");
}

TEST_CASE("float16: rounding at every boundary is to nearest, ties to even", "[half]") {
  CHECK(check_every_boundary(kFloat16Converters) == "");
}

TEST_CASE("bfloat16: rounding at every boundary is to nearest, ties to even", "[half]") {
  CHECK(check_every_boundary(kBFloat16Converters) == "");
}

TEST_CASE("float16 and bfloat16 narrow random floats like the reference", "[half]") {
  CHECK(check_random_floats(kFloat16Converters) == "");
  CHECK(check_random_floats(kBFloat16Converters) == "");
}

TEST_CASE("float16 known values", "[half]") {
  CHECK(float_to_float16(1.0f) == 0x3C00);
  CHECK(float16_to_float(0x3C00) == 1.0f);
  CHECK(float_to_float16(-2.0f) == 0xC000);
  CHECK(float_to_float16(65504.0f) == 0x7BFF);
  CHECK(float16_to_float(0x7BFF) == 65504.0f);
  // 65520 is halfway to 2^16; the tie goes to the even side, infinity.
  CHECK(float_to_float16(65519.996f) == 0x7BFF);
  CHECK(float_to_float16(65520.0f) == 0x7C00);
  CHECK(float_to_float16(-65520.0f) == 0xFC00);
  CHECK(float_to_float16(1e10f) == 0x7C00);
  CHECK(float_to_float16(HUGE_VALF) == 0x7C00);
  CHECK(float_to_float16(-HUGE_VALF) == 0xFC00);
  CHECK(float16_to_float(0x7C00) == HUGE_VALF);
  // Smallest subnormal, smallest normal, and the half-way-to-zero tie.
  CHECK(float16_to_float(0x0001) == std::ldexp(1.0f, -24));
  CHECK(float_to_float16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(float16_to_float(0x0400) == std::ldexp(1.0f, -14));
  CHECK(float_to_float16(std::ldexp(1.0f, -25)) == 0x0000);
  CHECK(float_to_float16(std::ldexp(1.5f, -25)) == 0x0001);
  CHECK(float_to_float16(std::ldexp(3.0f, -25)) == 0x0002);  // 1.5 units: tie to even 2
  CHECK(float_to_float16(-std::ldexp(1.0f, -30)) == 0x8000);
  CHECK(float_to_float16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  // 1 + 2^-11 is halfway between 1 and the next float16, 1 + 2^-10: stays at
  // the even 1.0. 1 + 3 * 2^-11 is halfway between two odd/even neighbours
  // and goes up to the even 1 + 2^-9.
  CHECK(float_to_float16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);
  CHECK(float_to_float16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);
  CHECK(float_to_float16(-0.0f) == 0x8000);
  CHECK(std::signbit(float16_to_float(0x8000)));
}

TEST_CASE("bfloat16 known values", "[half]") {
  CHECK(float_to_bfloat16(1.0f) == 0x3F80);
  CHECK(bfloat16_to_float(0x3F80) == 1.0f);
  CHECK(float_to_bfloat16(-2.0f) == 0xC000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even 1.0;
  // 1 + 3 * 2^-8 goes up to the even 1 + 2^-6.
  CHECK(float_to_bfloat16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);
  CHECK(float_to_bfloat16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);
  CHECK(float_to_bfloat16(std::numeric_limits<float>::max()) == 0x7F80);
  CHECK(float_to_bfloat16(HUGE_VALF) == 0x7F80);
  CHECK(float_to_bfloat16(std::numeric_limits<float>::denorm_min()) == 0x0000);
  CHECK(bfloat16_to_float(0x0001) == std::ldexp(1.0f, -133));
}

TEST_CASE("NaN stays NaN through both formats", "[half]") {
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  // A signalling NaN whose payload lives only in bits that narrowing drops.
  const float signalling_low_payload = float_of(0x7f800001u);
  for (float nan : {quiet, -quiet, signalling_low_payload}) {
    CAPTURE(bits_of(nan));
    CHECK(ref_is_nan_bits(float_to_float16(nan), kBinary16));
    CHECK(ref_is_nan_bits(float_to_bfloat16(nan), kBFloat16Format));
  }
  // Widening a signalling NaN gives a quiet float NaN.
  CHECK((bits_of(float16_to_float(0x7C01)) & 0x00400000u) != 0);
  CHECK((bits_of(bfloat16_to_float(0x7F81)) & 0x00400000u) != 0);
  CHECK(std::isnan(float16_to_float(0xFE00)));
}

}  // namespace herd::ops
