// Helpers of the collectives unit tests: reductions of their own (so the
// tests do not depend on ops/), a runner that plays p ranks on p threads over
// the in-process fabric, and a transport that counts what it sends.
// The reductions also serve the plain MPI tests (tests/mpi/raw_mpi_test_util.h).
//
// Catch2 assertions are not thread-safe, so rank threads only record their
// Status and buffer; the test thread checks them afterwards.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "collectives/inproc/inproc_transport.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives::testing {

// dst[i] = combine(a[i], b[i]) on elements of type T.
template <typename T, typename Combine>
ops::ReduceFn elementwise(Combine combine) {
  return [combine](void* dst, const void* a, const void* b, int64_t count) {
    auto* out = static_cast<T*>(dst);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    for (int64_t i = 0; i < count; ++i) out[i] = combine(x[i], y[i]);
  };
}

inline ops::ReduceFn float_sum() {
  return elementwise<float>([](float a, float b) { return a + b; });
}
inline ops::ReduceFn int32_sum() {
  return elementwise<int32_t>([](int32_t a, int32_t b) { return a + b; });
}
inline ops::ReduceFn int32_max() {
  return elementwise<int32_t>([](int32_t a, int32_t b) { return a < b ? b : a; });
}
inline ops::ReduceFn int32_min() {
  return elementwise<int32_t>([](int32_t a, int32_t b) { return b < a ? b : a; });
}

// An allreduce algorithm as the tests call it.
using AllreduceFn = std::function<Status(void* buf, int64_t count, std::size_t element_size,
                                         const ops::ReduceFn& reduce, Transport& transport)>;

template <typename T>
struct RankResult {
  Status status;
  std::vector<T> data;
};

// Runs `algorithm` on p thread-ranks, rank r starting from input(r, i), and
// returns every rank's Status and final buffer.
template <typename T>
std::vector<RankResult<T>> run_allreduce(int p, int64_t count,
                                         const std::function<T(int rank, int64_t i)>& input,
                                         const ops::ReduceFn& reduce,
                                         const AllreduceFn& algorithm) {
  std::vector<RankResult<T>> results(static_cast<std::size_t>(p));
  run_inproc_ranks(p, [&](int rank, Transport& transport) {
    RankResult<T>& result = results[static_cast<std::size_t>(rank)];
    result.data.resize(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) result.data[static_cast<std::size_t>(i)] = input(rank, i);
    result.status = algorithm(result.data.data(), count, sizeof(T), reduce, transport);
  });
  return results;
}

// "" if every rank succeeded and holds expected(i) at every index i; else the
// first failure: rank, index, expected and actual, and how many mismatched.
template <typename T>
std::string first_mismatch(const std::vector<RankResult<T>>& results,
                           const std::function<T(int64_t i)>& expected) {
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    const RankResult<T>& result = results[rank];
    if (!result.status.is_ok()) {
      return "rank " + std::to_string(rank) + " failed: " + result.status.message();
    }
    int64_t mismatches = 0;
    std::ostringstream first;
    for (std::size_t i = 0; i < result.data.size(); ++i) {
      const T want = expected(static_cast<int64_t>(i));
      if (result.data[i] == want) continue;
      if (mismatches++ == 0) {
        first << "rank " << rank << " index " << i << ": expected " << want << ", actual "
              << result.data[i];
      }
    }
    if (mismatches > 0) {
      return first.str() + " (" + std::to_string(mismatches) + " of " +
             std::to_string(result.data.size()) + " elements wrong on this rank)";
    }
  }
  return "";
}

// "" if every rank's buffer has the same bits as rank 0's; else the first
// rank and index that differ.
template <typename T>
std::string first_difference_from_rank0(const std::vector<RankResult<T>>& results) {
  for (std::size_t rank = 1; rank < results.size(); ++rank) {
    for (std::size_t i = 0; i < results[rank].data.size(); ++i) {
      if (std::memcmp(&results[rank].data[i], &results[0].data[i], sizeof(T)) != 0) {
        std::ostringstream out;
        out.precision(9);
        out << "rank " << rank << " index " << i << ": rank 0 has " << results[0].data[i]
            << ", this rank " << results[rank].data[i];
        return out.str();
      }
    }
  }
  return "";
}

// Forwards to another transport and counts the sends and their bytes.
class CountingTransport final : public Transport {
 public:
  explicit CountingTransport(Transport& inner) : inner_(inner) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  std::unique_ptr<PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) override {
    ++sends_;
    sent_bytes_ += static_cast<int64_t>(bytes);
    return inner_.isend(data, bytes, peer, tag);
  }
  std::unique_ptr<PendingTransfer> irecv(void* data, std::size_t bytes, int peer,
                                         int tag) override {
    return inner_.irecv(data, bytes, peer, tag);
  }

  int64_t sends() const { return sends_; }
  int64_t sent_bytes() const { return sent_bytes_; }

 private:
  Transport& inner_;
  int64_t sends_ = 0;
  int64_t sent_bytes_ = 0;
};

// Whether a ring sweep runs segments of `segment_bytes` over `count` elements
// at p ranks. Segments of one and five elements over the largest counts are
// thousands of messages a step; they run at 2 to 4 ranks, where a chunk
// holds the most segments (past 2^15 at 2 ranks), and are left out above,
// where they take most of a sweep's time and cross the same code.
inline bool ring_sweep_case(int p, int64_t count, std::size_t segment_bytes,
                            std::size_t default_segment_bytes) {
  return !(segment_bytes < default_segment_bytes && count > 10000 && p > 4);
}

}  // namespace herd::collectives::testing
