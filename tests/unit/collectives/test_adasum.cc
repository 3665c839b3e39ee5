// Adasum allreduce over the in-process fabric at 2, 4 and 8 ranks: against a
// reference written here (the Adasum rule applied pairwise in rank order, in
// double, one tensor at a time), for float16, float32 and float64, single
// tensors and fused buffers of several (each with its own coefficients),
// counts below the rank count and zero-length tensors; the closed forms
// (orthogonal vectors add, equal ones average, a zero vector changes
// nothing); bit-identical results on every rank; the traffic; the refusal of
// rank counts that are not a power of two; a missing rank.
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "adasum_reference.h"
#include "collectives/adasum.h"
#include "collectives/inproc/inproc_transport.h"
#include "collectives_test_util.h"
#include "ops/half.h"

namespace herd::collectives {
namespace {

using testing::adasum_tree;

// Element types as the test stores them; float16 as its bits.
template <typename T>
struct Element;
template <>
struct Element<float> {
  static constexpr DataType kType = DataType::kFloat32;
  static float from(double v) { return static_cast<float>(v); }
  static double to(float v) { return v; }
};
template <>
struct Element<double> {
  static constexpr DataType kType = DataType::kFloat64;
  static double from(double v) { return v; }
  static double to(double v) { return v; }
};
template <>
struct Element<uint16_t> {
  static constexpr DataType kType = DataType::kFloat16;
  static uint16_t from(double v) { return ops::float_to_float16(static_cast<float>(v)); }
  static double to(uint16_t v) { return ops::float16_to_float(v); }
};

// A value of tensor t, element i on `rank`: each rank's vectors point in
// different directions, with norms that differ by rank.
double sample(int rank, std::size_t t, int64_t i) {
  const double phase = 0.7 * rank + 1.3 * static_cast<double>(t) + 0.37 * static_cast<double>(i);
  return (1.0 + 0.5 * rank) * std::sin(phase) + 0.25 * std::cos(2.1 * phase + rank);
}

using Input = std::function<double(int rank, std::size_t t, int64_t i)>;

template <typename T>
struct Run {
  std::vector<Status> statuses;
  std::vector<std::vector<T>> buffers;  // per rank, every tensor back to back
};

template <typename T>
Run<T> run_adasum(int p, const std::vector<int64_t>& counts, const Input& input) {
  Run<T> run;
  run.statuses.resize(static_cast<std::size_t>(p));
  run.buffers.resize(static_cast<std::size_t>(p));
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t{0});
  run_inproc_ranks(p, [&](int rank, Transport& transport) {
    std::vector<T>& buf = run.buffers[static_cast<std::size_t>(rank)];
    buf.reserve(static_cast<std::size_t>(total));
    for (std::size_t t = 0; t < counts.size(); ++t) {
      for (int64_t i = 0; i < counts[t]; ++i) buf.push_back(Element<T>::from(input(rank, t, i)));
    }
    run.statuses[static_cast<std::size_t>(rank)] =
        adasum_allreduce(buf.data(), counts, Element<T>::kType, transport);
  });
  return run;
}

// "" when every rank succeeded with the same bits and each tensor is within
// `tolerance` of the reference in norm (relative to the reference's norm);
// else what went wrong, where.
template <typename T>
std::string check_against_reference(int p, const std::vector<int64_t>& counts, const Input& input,
                                    double tolerance) {
  const Run<T> run = run_adasum<T>(p, counts, input);
  for (int rank = 0; rank < p; ++rank) {
    const Status& status = run.statuses[static_cast<std::size_t>(rank)];
    if (!status.is_ok()) return "rank " + std::to_string(rank) + ": " + status.message();
    // An empty buffer's data() may be null, which memcmp must not be given.
    if (!run.buffers[0].empty() &&
        std::memcmp(run.buffers[static_cast<std::size_t>(rank)].data(), run.buffers[0].data(),
                    run.buffers[0].size() * sizeof(T)) != 0) {
      return "rank " + std::to_string(rank) + "'s result differs from rank 0's";
    }
  }
  int64_t offset = 0;
  for (std::size_t t = 0; t < counts.size(); ++t) {
    // The reference starts from the values the ranks actually held.
    std::vector<std::vector<double>> vectors(static_cast<std::size_t>(p));
    for (int rank = 0; rank < p; ++rank) {
      for (int64_t i = 0; i < counts[t]; ++i) {
        vectors[static_cast<std::size_t>(rank)].push_back(
            Element<T>::to(Element<T>::from(input(rank, t, i))));
      }
    }
    const std::vector<double> expected = adasum_tree(vectors, 0, static_cast<std::size_t>(p));
    double error2 = 0, norm2 = 0;
    for (int64_t i = 0; i < counts[t]; ++i) {
      const double actual = Element<T>::to(run.buffers[0][static_cast<std::size_t>(offset + i)]);
      error2 += (actual - expected[static_cast<std::size_t>(i)]) *
                (actual - expected[static_cast<std::size_t>(i)]);
      norm2 += expected[static_cast<std::size_t>(i)] * expected[static_cast<std::size_t>(i)];
    }
    if (std::sqrt(error2) > tolerance * std::sqrt(norm2) + 1e-300) {
      std::ostringstream out;
      out << "tensor " << t << " (" << counts[t] << " elements): relative error "
          << std::sqrt(error2 / norm2) << " above " << tolerance;
      return out.str();
    }
    offset += counts[t];
  }
  return "";
}

const std::vector<int> kRanks = {2, 4, 8};
const std::vector<std::vector<int64_t>> kLayouts = {
    {1}, {3}, {7}, {100}, {1001}, {5, 0, 17, 1, 64}, {0}, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3}};

TEST_CASE("adasum allreduce matches the pairwise rank-order reference", "[adasum]") {
  for (int p : kRanks) {
    for (const auto& counts : kLayouts) {
      INFO(p << " ranks, " << counts.size() << " tensors, first of " << counts[0] << " elements");
      CHECK(check_against_reference<double>(p, counts, sample, 1e-12) == "");
      CHECK(check_against_reference<float>(p, counts, sample, 1e-5) == "");
      CHECK(check_against_reference<uint16_t>(p, counts, sample, 1e-2) == "");
    }
  }
}

TEST_CASE("adasum allreduce gives each fused tensor its own coefficients", "[adasum]") {
  // Two tensors whose ranks' vectors are parallel (Adasum averages them) and
  // orthogonal (Adasum adds them) in one buffer: a single coefficient per
  // buffer could not give both.
  const int p = 4;
  const int64_t n = 8;
  // Tensor 0: rank r holds (r + 1) * u. Tensor 1: rank r holds e_r scaled by (r + 1).
  const Input input = [](int rank, std::size_t t, int64_t i) {
    if (t == 0) return (rank + 1) * (1.0 + static_cast<double>(i));
    return i == rank ? rank + 1.0 : 0.0;
  };
  const Run<double> run = run_adasum<double>(p, {n, n}, input);
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    REQUIRE(run.statuses[static_cast<std::size_t>(rank)].is_ok());
    for (int64_t i = 0; i < n; ++i) {
      // Mean of (r + 1) over 4 ranks: 2.5.
      CHECK(run.buffers[static_cast<std::size_t>(rank)][static_cast<std::size_t>(i)] ==
            Approx(2.5 * (1.0 + static_cast<double>(i))).epsilon(1e-14));
      CHECK(run.buffers[static_cast<std::size_t>(rank)][static_cast<std::size_t>(n + i)] ==
            Approx(i < p ? i + 1.0 : 0.0).margin(1e-14));
    }
  }
}

TEST_CASE("adasum allreduce of a zero vector with another leaves the other", "[adasum]") {
  // Rank 0 holds zeros; on 2 ranks the result is rank 1's vector exactly.
  const Input input = [](int rank, std::size_t, int64_t i) {
    return rank == 0 ? 0.0 : 0.5 + static_cast<double>(i);
  };
  const Run<float> run = run_adasum<float>(2, {9}, input);
  for (int rank = 0; rank < 2; ++rank) {
    REQUIRE(run.statuses[static_cast<std::size_t>(rank)].is_ok());
    for (int64_t i = 0; i < 9; ++i) {
      CHECK(run.buffers[static_cast<std::size_t>(rank)][static_cast<std::size_t>(i)] ==
            0.5f + static_cast<float>(i));
    }
  }
  // All zeros stays all zeros (no division by a zero norm).
  const Run<float> zeros = run_adasum<float>(4, {5}, [](int, std::size_t, int64_t) { return 0.0; });
  for (int rank = 0; rank < 4; ++rank) {
    REQUIRE(zeros.statuses[static_cast<std::size_t>(rank)].is_ok());
    CHECK(zeros.buffers[static_cast<std::size_t>(rank)] == std::vector<float>(5, 0.0f));
  }
}

TEST_CASE("adasum allreduce on one rank leaves the buffer", "[adasum]") {
  const Run<float> run = run_adasum<float>(1, {3, 2}, sample);
  REQUIRE(run.statuses[0].is_ok());
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(run.buffers[0][i] == static_cast<float>(sample(0, 0, static_cast<int64_t>(i))));
}

TEST_CASE("adasum allreduce sends 2(p-1)/p of the buffer and 3 doubles per tensor and level",
          "[adasum]") {
  const int p = 4;
  const std::vector<int64_t> counts = {40, 24};  // 64 floats
  std::vector<int64_t> bytes(p), sends(p);
  std::vector<Status> statuses(p);
  run_inproc_ranks(p, [&](int rank, Transport& transport) {
    testing::CountingTransport counting(transport);
    std::vector<float> buf(64, 1.0f + static_cast<float>(rank));
    statuses[static_cast<std::size_t>(rank)] =
        adasum_allreduce(buf.data(), counts, DataType::kFloat32, counting);
    bytes[static_cast<std::size_t>(rank)] = counting.sent_bytes();
    sends[static_cast<std::size_t>(rank)] = counting.sends();
  });
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(statuses[static_cast<std::size_t>(rank)].is_ok());
    // Halves: 32 + 16 floats out, 16 + 32 back; norms: 1 exchange at level 1,
    // 2 at level 2, of 2 tensors x 3 doubles.
    CHECK(bytes[static_cast<std::size_t>(rank)] == (32 + 16 + 16 + 32) * 4 + 3 * 6 * 8);
    CHECK(sends[static_cast<std::size_t>(rank)] == 2 + 3 + 2);
  }
}

TEST_CASE("adasum allreduce refuses a rank count that is not a power of two on every rank",
          "[adasum]") {
  CHECK(adasum_supports_ranks(1));
  CHECK(adasum_supports_ranks(2));
  CHECK(adasum_supports_ranks(64));
  CHECK_FALSE(adasum_supports_ranks(0));
  CHECK_FALSE(adasum_supports_ranks(3));
  CHECK_FALSE(adasum_supports_ranks(12));
  for (int p : {3, 5, 6, 7}) {
    INFO(p << " ranks");
    std::vector<Status> statuses(static_cast<std::size_t>(p));
    std::vector<int64_t> sends(static_cast<std::size_t>(p));
    run_inproc_ranks(p, [&](int rank, Transport& transport) {
      testing::CountingTransport counting(transport);
      std::vector<float> buf(10, 1.0f);
      statuses[static_cast<std::size_t>(rank)] =
          adasum_allreduce(buf.data(), {10}, DataType::kFloat32, counting);
      sends[static_cast<std::size_t>(rank)] = counting.sends();
    });
    for (int rank = 0; rank < p; ++rank) {
      const Status& status = statuses[static_cast<std::size_t>(rank)];
      CHECK_FALSE(status.is_ok());
      CHECK(status.kind() == ErrorKind::kNotImplemented);
      CHECK_THAT(status.message(), Catch::Contains("power-of-two") &&
                                       Catch::Contains("has " + std::to_string(p) + " ranks"));
      CHECK(sends[static_cast<std::size_t>(rank)] == 0);
    }
  }
}

TEST_CASE("adasum allreduce fails naming the level and peer when a rank is missing", "[adasum]") {
  const int p = 4;
  InprocFabric fabric(p, std::chrono::milliseconds(200));
  std::vector<std::string> messages(p);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    if (rank == 3) continue;
    threads.emplace_back([&, rank, transport = fabric.transport(rank)] {
      std::vector<float> buf(16, 1.0f);
      messages[static_cast<std::size_t>(rank)] =
          adasum_allreduce(buf.data(), {16}, DataType::kFloat32, *transport).message();
    });
  }
  for (auto& thread : threads) thread.join();
  // Rank 2 pairs with the missing rank 3 at level 1.
  CHECK_THAT(messages[2],
             Catch::Contains("adasum allreduce reduce") && Catch::Contains("recv from 3"));
  for (int rank : {0, 1}) CHECK(messages[static_cast<std::size_t>(rank)] != "");
}

}  // namespace
}  // namespace herd::collectives
