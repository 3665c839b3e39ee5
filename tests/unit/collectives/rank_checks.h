// Helpers of the tests of collectives whose result differs from rank to rank
// (reducescatter, alltoallv) or whose inputs are byte blocks (allgatherv,
// broadcast): run a body on p thread-ranks keeping each rank's Status and
// buffer, compare each rank's buffer with a closed form of (rank, index), and
// collect the error messages of a run where ranks disagree or one is absent.
//
// As in collectives_test_util.h, rank threads only record; the test thread
// checks afterwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "collectives/inproc/inproc_transport.h"
#include "collectives/transport.h"
#include "collectives_test_util.h"
#include "common/status.h"

namespace herd::collectives::testing {

// Runs body(rank, transport, data) on p thread-ranks over a fresh fabric;
// body fills data (the rank's result buffer) and returns the collective's
// Status.
template <typename T>
std::vector<RankResult<T>> run_ranks(
    int p,
    const std::function<Status(int rank, Transport& transport, std::vector<T>& data)>& body) {
  std::vector<RankResult<T>> results(static_cast<std::size_t>(p));
  run_inproc_ranks(p, [&](int rank, Transport& transport) {
    RankResult<T>& result = results[static_cast<std::size_t>(rank)];
    result.status = body(rank, transport, result.data);
  });
  return results;
}

// "" if every rank succeeded, holds expected_size(rank) elements and
// expected(rank, i) at every index i; else the first failure: rank, index,
// expected and actual, and how many elements of that rank mismatched.
// Characters print as numbers.
template <typename T>
std::string first_mismatch_by_rank(const std::vector<RankResult<T>>& results,
                                   const std::function<int64_t(int rank)>& expected_size,
                                   const std::function<T(int rank, int64_t i)>& expected) {
  for (std::size_t r = 0; r < results.size(); ++r) {
    const int rank = static_cast<int>(r);
    const RankResult<T>& result = results[r];
    if (!result.status.is_ok()) {
      return "rank " + std::to_string(rank) + " failed: " + result.status.message();
    }
    const int64_t size = static_cast<int64_t>(result.data.size());
    if (size != expected_size(rank)) {
      return "rank " + std::to_string(rank) + " holds " + std::to_string(size) +
             " elements, expected " + std::to_string(expected_size(rank));
    }
    int64_t mismatches = 0;
    std::ostringstream first;
    first.precision(9);
    for (int64_t i = 0; i < size; ++i) {
      const T want = expected(rank, i);
      const T actual = result.data[static_cast<std::size_t>(i)];
      if (actual == want) continue;
      if (mismatches++ == 0) {
        first << "rank " << rank << " index " << i << ": expected " << +want << ", actual "
              << +actual;
      }
    }
    if (mismatches > 0) {
      return first.str() + " (" + std::to_string(mismatches) + " of " + std::to_string(size) +
             " elements wrong on this rank)";
    }
  }
  return "";
}

// Runs body(rank, transport) on every rank of a fabric with a 200 ms receive
// timeout except `absent` (-1: none), which never calls; returns each rank's
// Status message ("" for OK and for the absent rank).
inline std::vector<std::string> run_for_messages(
    int p, int absent, const std::function<Status(int rank, Transport& transport)>& body) {
  InprocFabric fabric(p, std::chrono::milliseconds(200));
  std::vector<std::string> messages(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    if (rank == absent) continue;
    threads.emplace_back([&, rank, transport = fabric.transport(rank)] {
      messages[static_cast<std::size_t>(rank)] = body(rank, *transport).message();
    });
  }
  for (auto& thread : threads) thread.join();
  return messages;
}

// Sum of counts[0..index).
inline int64_t prefix_sum(const std::vector<int64_t>& counts, int index) {
  int64_t sum = 0;
  for (int i = 0; i < index; ++i) sum += counts[static_cast<std::size_t>(i)];
  return sum;
}

// The block that global index i falls in, for consecutive blocks of counts.
inline int block_of(const std::vector<int64_t>& counts, int64_t i) {
  int block = 0;
  while (i >= counts[static_cast<std::size_t>(block)])
    i -= counts[static_cast<std::size_t>(block++)];
  return block;
}

}  // namespace herd::collectives::testing
