// kvstore/gradient_compression.h against MXNet's published vectors, vectors
// worked out by hand, and a scalar reference of the rules written here from
// the description of the format (one element at a time, codes placed by word,
// byte and slot), in float32 as upstream computes.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "kvstore/gradient_compression.h"
#include "tests/unit/kvstore/compression_reference.h"

namespace herd {
namespace kv {
namespace {

using test::Bytes;
using test::Reference;
using test::reference_quantize;

CompressionParams two_bit(float threshold) { return {CompressionType::k2Bit, threshold}; }
CompressionParams one_bit(float threshold) { return {CompressionType::k1Bit, threshold}; }

// quantize() into a buffer pre-filled with 0xa5, so unwritten bytes show.
Bytes run_quantize(const CompressionParams& p, const std::vector<float>& grad,
                   std::vector<float>& residual) {
  Bytes codes(static_cast<size_t>(compressed_bytes(p.type, static_cast<int64_t>(grad.size()))),
              0xa5);
  quantize(p, grad.data(), residual.data(), static_cast<int64_t>(grad.size()), codes.data());
  return codes;
}

std::vector<float> run_dequantize(const CompressionParams& p, const Bytes& codes, size_t n) {
  std::vector<float> out(n, 123.0f);
  dequantize(p, codes.data(), static_cast<int64_t>(n), out.data());
  return out;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void check_floats(const std::vector<float>& actual, const std::vector<float>& expected) {
  REQUIRE(actual.size() == expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("index " << i << ": expected " << expected[i] << ", actual " << actual[i]);
    CHECK(same_bits(actual[i], expected[i]));
  }
}

// Decimal values that float32 arithmetic only approximates.
void check_near(const std::vector<float>& actual, const std::vector<double>& decimal) {
  REQUIRE(actual.size() == decimal.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    INFO("index " << i);
    CHECK(actual[i] == Approx(decimal[i]).margin(1e-6));
  }
}

TEST_CASE("compressed_bytes: whole float32 words of codes", "[kvstore][compression]") {
  CHECK(compressed_bytes(CompressionType::k2Bit, 0) == 0);
  CHECK(compressed_bytes(CompressionType::k2Bit, 1) == 4);
  CHECK(compressed_bytes(CompressionType::k2Bit, 16) == 4);
  CHECK(compressed_bytes(CompressionType::k2Bit, 17) == 8);
  CHECK(compressed_bytes(CompressionType::k2Bit, 25557032) == 6389260);
  CHECK(compressed_bytes(CompressionType::k1Bit, 1) == 4);
  CHECK(compressed_bytes(CompressionType::k1Bit, 32) == 4);
  CHECK(compressed_bytes(CompressionType::k1Bit, 33) == 8);
  CHECK(compressed_bytes(CompressionType::kNone, 5) == 20);
  CHECK_THROWS_AS(compressed_bytes(CompressionType::k2Bit, -1), Error);
}

TEST_CASE("2bit: MXNet's vectors, two steps with error feedback", "[kvstore][compression]") {
  const auto p = two_bit(0.5f);
  const std::vector<float> g = {0.3f, -0.7f, 0.6f, 0.1f, 1.2f};
  std::vector<float> r(5, 0.0f);

  // Codes 00 10 11 00 | 11.
  const Bytes first = run_quantize(p, g, r);
  CHECK(first == Bytes{0x2c, 0xc0, 0x00, 0x00});
  check_floats(run_dequantize(p, first, 5), {0.0f, -0.5f, 0.5f, 0.0f, 0.5f});
  check_floats(r, {0.0f + 0.3f, (0.0f + -0.7f) + 0.5f, (0.0f + 0.6f) - 0.5f, 0.0f + 0.1f,
                   (0.0f + 1.2f) - 0.5f});
  check_near(r, {0.3, -0.2, 0.1, 0.1, 0.7});

  // Codes 11 10 11 00 | 11.
  const std::vector<float> r1 = r;
  const Bytes second = run_quantize(p, g, r);
  CHECK(second == Bytes{0xec, 0xc0, 0x00, 0x00});
  check_floats(run_dequantize(p, second, 5), {0.5f, -0.5f, 0.5f, 0.0f, 0.5f});
  check_floats(r, {(r1[0] + 0.3f) - 0.5f, (r1[1] + -0.7f) + 0.5f, (r1[2] + 0.6f) - 0.5f,
                   r1[3] + 0.1f, (r1[4] + 1.2f) - 0.5f});
  check_near(r, {0.1, -0.4, 0.2, 0.2, 1.4});
}

TEST_CASE("2bit: a residual equal to the threshold sends it", "[kvstore][compression]") {
  const auto p = two_bit(0.5f);
  std::vector<float> r(3, 0.0f);
  // Codes 11 10 00.
  const Bytes codes = run_quantize(p, {0.5f, -0.5f, 0.25f}, r);
  CHECK(codes == Bytes{0xe0, 0x00, 0x00, 0x00});
  check_floats(r, {0.0f, 0.0f, 0.25f});
}

TEST_CASE("2bit: codes 01 decode to 0, and dequantize_add adds", "[kvstore][compression]") {
  const auto p = two_bit(0.25f);
  // Bytes 0b01'11'10'00 and 0b11'00'00'01: values 0, +t, -t, 0 | +t, 0, 0, 0.
  const Bytes codes = {0x78, 0xc1, 0x00, 0x00};
  check_floats(run_dequantize(p, codes, 8), {0.0f, 0.25f, -0.25f, 0.0f, 0.25f, 0.0f, 0.0f, 0.0f});
  std::vector<float> sum = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 1.0f};
  dequantize_add(p, codes.data(), 8, sum.data());
  check_floats(sum, {1.0f, 1.25f, 0.75f, 1.0f, 1.25f, 1.0f, 1.0f, 1.0f});
}

TEST_CASE("1bit: vectors worked out by hand", "[kvstore][compression]") {
  SECTION("threshold 0, two steps") {
    const auto p = one_bit(0.0f);
    const std::vector<float> g = {0.3f, -0.7f, 0.6f, 0.1f, 1.2f, -0.1f, 0.0f, 0.5f, 2.0f};
    std::vector<float> r(9, 0.0f);
    // Sums 0.3 -0.7 0.6 0.1 1.2 -0.1 0 0.5 | 2: bits 1011 1001 | 1 (0 is not > 0).
    const Bytes first = run_quantize(p, g, r);
    CHECK(first == Bytes{0xb9, 0x80, 0x00, 0x00});
    check_floats(run_dequantize(p, first, 9),
                 {1.0f, -1.0f, 1.0f, 1.0f, 1.0f, -1.0f, -1.0f, 1.0f, 1.0f});
    check_near(r, {-0.7, 0.3, -0.4, -0.9, 0.2, 0.9, 1.0, -0.5, 1.0});
    // Sums -0.4 -0.4 0.2 -0.8 1.4 0.8 1 0 | 3: bits 0010 1110 | 1.
    const Bytes second = run_quantize(p, g, r);
    CHECK(second == Bytes{0x2e, 0x80, 0x00, 0x00});
    check_floats(run_dequantize(p, second, 9),
                 {-1.0f, -1.0f, 1.0f, -1.0f, 1.0f, 1.0f, 1.0f, -1.0f, 1.0f});
    check_near(r, {0.6, 0.6, -0.8, 0.2, 0.4, -0.2, 0.0, 1.0, 2.0});
  }
  SECTION("threshold 0.5: strictly greater, and +-1 whatever the threshold") {
    const auto p = one_bit(0.5f);
    std::vector<float> r(3, 0.0f);
    const Bytes codes = run_quantize(p, {0.5f, 0.625f, -2.0f}, r);
    CHECK(codes == Bytes{0x40, 0x00, 0x00, 0x00});
    check_floats(r, {1.5f, -0.375f, -1.0f});
    check_floats(run_dequantize(p, codes, 3), {-1.0f, 1.0f, -1.0f});
  }
  SECTION("value 31 is the last bit of the word, value 32 opens the next") {
    const auto p = one_bit(0.0f);
    std::vector<float> g(33, -1.0f);
    g[31] = 1.0f;
    g[32] = 1.0f;
    std::vector<float> r(33, 0.0f);
    CHECK(run_quantize(p, g, r) == Bytes{0, 0, 0, 0x01, 0x80, 0, 0, 0});
  }
}

// Gradients mixing exact multiples of the threshold (to hit the equalities)
// with arbitrary floats of both signs and several magnitudes.
std::vector<float> random_gradient(std::mt19937& rng, size_t n, float threshold) {
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_int_distribution<int> multiple(-4, 4);
  std::uniform_real_distribution<float> small(-threshold, threshold);
  std::uniform_real_distribution<float> large(-5.0f * threshold, 5.0f * threshold);
  std::vector<float> g(n);
  for (auto& v : g) {
    switch (kind(rng)) {
      case 0: v = threshold * static_cast<float>(multiple(rng)) / 2.0f; break;
      case 1: v = small(rng); break;
      case 2: v = large(rng); break;
      default: v = small(rng) * 1e-3f;
    }
  }
  return g;
}

TEST_CASE("2bit and 1bit against the scalar reference over random arrays",
          "[kvstore][compression]") {
  const std::vector<size_t> sizes = {1, 3, 4, 5, 15, 16, 17, 31, 32, 33, 63, 64, 65, 1000, 4099};
  const std::vector<CompressionParams> kinds = {two_bit(0.5f), two_bit(0.01f), two_bit(3.0f),
                                                one_bit(0.0f), one_bit(0.25f), one_bit(-0.5f)};
  std::mt19937 rng(20261206);
  for (const auto& p : kinds) {
    for (size_t n : sizes) {
      INFO(to_string(p.type) << " threshold " << p.threshold << ", n " << n);
      std::vector<float> residual(n, 0.0f);
      std::vector<float> expected_residual(n, 0.0f);
      std::vector<float> sum(n, 0.0f);
      std::vector<float> expected_sum(n, 0.0f);
      for (int step = 0; step < 4; ++step) {
        const auto g = random_gradient(rng, n, p.threshold == 0.0f ? 1.0f : std::fabs(p.threshold));
        const Reference ref = reference_quantize(p, g, expected_residual);
        const Bytes codes = run_quantize(p, g, residual);
        CHECK(codes == ref.codes);
        check_floats(residual, expected_residual);
        check_floats(run_dequantize(p, codes, n), ref.dequantized);
        dequantize_add(p, codes.data(), static_cast<int64_t>(n), sum.data());
        for (size_t i = 0; i < n; ++i) expected_sum[i] += ref.dequantized[i];
        check_floats(sum, expected_sum);
      }
    }
  }
}

TEST_CASE("dequantize_sum: dequantize, then dequantize_add of each further array",
          "[kvstore][compression]") {
  std::mt19937 rng(11);
  for (const auto& p : {two_bit(0.375f), one_bit(0.0f)}) {
    for (size_t n :
         {size_t{1}, size_t{17}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{5000}}) {
      for (int count : {1, 2, 3, 5}) {
        INFO(to_string(p.type) << ", n " << n << ", " << count << " arrays");
        std::vector<Bytes> arrays;
        std::vector<const uint8_t*> pointers;
        for (int k = 0; k < count; ++k) {
          std::vector<float> r(n, 0.0f);
          arrays.push_back(run_quantize(p, random_gradient(rng, n, 0.375f), r));
        }
        for (const Bytes& a : arrays) pointers.push_back(a.data());
        std::vector<float> expected = run_dequantize(p, arrays[0], n);
        for (int k = 1; k < count; ++k) {
          dequantize_add(p, arrays[static_cast<size_t>(k)].data(), static_cast<int64_t>(n),
                         expected.data());
        }
        std::vector<float> sum(n, 99.0f);
        dequantize_sum(p, pointers.data(), count, static_cast<int64_t>(n), sum.data());
        check_floats(sum, expected);
      }
    }
  }
  std::vector<float> out(4);
  const uint8_t* none = nullptr;
  CHECK_THROWS_AS(dequantize_sum(two_bit(0.5f), &none, 0, 4, out.data()), Error);
}

TEST_CASE("error feedback: what was sent plus the residual is what was pushed",
          "[kvstore][compression]") {
  std::mt19937 rng(7);
  for (const auto& p : {two_bit(0.5f), two_bit(0.05f), one_bit(0.0f)}) {
    INFO(to_string(p.type) << " threshold " << p.threshold);
    const size_t n = 1000;
    const int steps = 50;
    std::vector<float> residual(n, 0.0f);
    std::vector<double> sent(n, 0.0), pushed(n, 0.0);
    for (int step = 0; step < steps; ++step) {
      const auto g = random_gradient(rng, n, 0.5f);
      const Bytes codes = run_quantize(p, g, residual);
      const auto d = run_dequantize(p, codes, n);
      for (size_t i = 0; i < n; ++i) {
        sent[i] += d[i];
        pushed[i] += g[i];
      }
    }
    for (size_t i = 0; i < n; ++i) {
      INFO("index " << i);
      // One float32 rounding of the residual per step, each below 2^-24 of a
      // magnitude of at most a few units.
      CHECK(sent[i] + residual[i] == Approx(pushed[i]).margin(steps * 4.0 * 6e-8 * 8));
    }
  }
}

TEST_CASE("2bit: a large residual drains by the threshold per step", "[kvstore][compression]") {
  const auto p = two_bit(0.5f);
  std::vector<float> r = {0.0f};
  CHECK(run_quantize(p, {1.75f}, r) == Bytes{0xc0, 0, 0, 0});
  check_floats(r, {1.25f});
  CHECK(run_quantize(p, {0.0f}, r) == Bytes{0xc0, 0, 0, 0});
  CHECK(run_quantize(p, {0.0f}, r) == Bytes{0xc0, 0, 0, 0});
  check_floats(r, {0.25f});
  CHECK(run_quantize(p, {0.0f}, r) == Bytes{0x00, 0, 0, 0});
  check_floats(r, {0.25f});
}

TEST_CASE("parse_compression: the types and thresholds upstream takes", "[kvstore][compression]") {
  CHECK(parse_compression("none", 0.5).type == CompressionType::kNone);
  const auto p2 = parse_compression("2bit", 0.25);
  CHECK(p2.type == CompressionType::k2Bit);
  CHECK(p2.threshold == 0.25f);
  const auto p1 = parse_compression("1bit", 0.0);
  CHECK(p1.type == CompressionType::k1Bit);
  CHECK(p1.threshold == 0.0f);
  CHECK(parse_compression("1bit", -0.5).threshold == -0.5f);
  CHECK(to_string(CompressionType::kNone) == "none");
  CHECK(to_string(CompressionType::k2Bit) == "2bit");
  CHECK(to_string(CompressionType::k1Bit) == "1bit");
}

TEST_CASE("parse_compression: refusals name the value", "[kvstore][compression]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(parse_compression("3bit", 0.5), Contains("\"3bit\""));
  CHECK_THROWS_WITH(parse_compression("2BIT", 0.5), Contains("\"2BIT\""));
  CHECK_THROWS_WITH(parse_compression("", 0.5), Contains("unknown type \"\""));
  CHECK_THROWS_WITH(parse_compression("2bit", 0.0), Contains("threshold 0 ") && Contains("2bit"));
  CHECK_THROWS_WITH(parse_compression("2bit", -0.5), Contains("threshold -0.5 "));
  // Below float32's smallest denormal: 0 once in float32.
  CHECK_THROWS_WITH(parse_compression("2bit", 1e-50), Contains("threshold 1e-50 "));
  CHECK_THROWS_WITH(parse_compression("2bit", std::nan("")), Contains("threshold nan "));
  CHECK_THROWS_WITH(parse_compression("2bit", 1e300), Contains("threshold 1e+300 "));
  CHECK_THROWS_WITH(parse_compression("1bit", INFINITY), Contains("threshold inf "));
  CHECK_THROWS_AS(parse_compression("3bit", 0.5), Error);
}

TEST_CASE("quantize and dequantize refuse type none", "[kvstore][compression]") {
  const CompressionParams none;
  std::vector<float> g(4, 0.0f), r(4, 0.0f);
  Bytes codes(16);
  CHECK_THROWS_AS(quantize(none, g.data(), r.data(), 4, codes.data()), Error);
  CHECK_THROWS_AS(dequantize(none, codes.data(), 4, g.data()), Error);
  CHECK_THROWS_AS(dequantize_add(none, codes.data(), 4, g.data()), Error);
}

}  // namespace
}  // namespace kv
}  // namespace herd
