// The collectives beyond allreduce over real MPI, without the runtime: ring
// allgatherv, binomial and chain broadcast, ring reducescatter and pairwise
// alltoallv, at sizes from 0 to 2^20 + 3 with uneven and empty blocks, over a
// transport with the default message limit and, for the small cases, one
// with a 7-byte limit so that every message is split into many MPI messages.
//
// A plain program run under mpiexec at 1..4 ranks. Each failure prints rank,
// case, index, expected and actual; the last line of each rank is
// "test_mpi_collectives rank R: N passed, M failed", and the program exits
// non-zero if any rank failed.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>

#include "collectives/allgather.h"
#include "collectives/alltoall.h"
#include "collectives/broadcast.h"
#include "collectives/chunking.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/reducescatter.h"
#include "ops/reduce.h"
#include "raw_mpi_test_util.h"

namespace herd::collectives {
namespace {

constexpr int64_t kLarge = (int64_t{1} << 20) + 3;

using testing::check_elements;
using testing::kFloatSum;
using testing::kInt32Max;
using testing::Tally;

int64_t prefix_sum(const std::vector<int64_t>& counts, int index) {
  int64_t sum = 0;
  for (int i = 0; i < index; ++i) sum += counts[static_cast<std::size_t>(i)];
  return sum;
}

// The blocks of a case: "r*3 % 5" (uneven, some empty) or `total` split into
// nearly equal chunks.
std::vector<int64_t> uneven_counts(int p) {
  std::vector<int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(r * 3 % 5);
  return counts;
}
std::vector<int64_t> chunk_counts(int64_t total, int p) {
  std::vector<int64_t> counts;
  for (int r = 0; r < p; ++r) counts.push_back(chunk_range(total, p, r).count);
  return counts;
}

unsigned char pattern(int rank, int64_t i) {
  return static_cast<unsigned char>((rank * 31 + i) % 251);
}

// Rank r contributes bytes_per_rank[r] bytes of pattern(r, j); every rank
// must end with them all in rank order.
void test_allgatherv(Tally& tally, Transport& transport, const std::string& name,
                     const std::vector<int64_t>& bytes_per_rank, std::size_t segment_bytes) {
  const int p = transport.size();
  const int rank = transport.rank();
  const int64_t total = prefix_sum(bytes_per_rank, p);
  std::vector<unsigned char> input;
  for (int64_t j = 0; j < bytes_per_rank[static_cast<std::size_t>(rank)]; ++j) {
    input.push_back(pattern(rank, j));
  }
  std::vector<unsigned char> output(static_cast<std::size_t>(total), 0xEE);
  const Status status =
      ring_allgatherv(input.data(), output.data(), bytes_per_rank, transport, segment_bytes);
  check_elements(
      tally, fmt::format("{} allgatherv of {} bytes, segment_bytes {}", name, total, segment_bytes),
      status, output, [&](int64_t i) {
        int block = 0;
        while (i >= bytes_per_rank[static_cast<std::size_t>(block)]) {
          i -= bytes_per_rank[static_cast<std::size_t>(block++)];
        }
        return pattern(block, i);
      });
}

// Every rank starts from its own pattern and must end with root's.
void test_broadcast(Tally& tally, Transport& transport, const std::string& name, int64_t bytes,
                    std::size_t segment_bytes) {
  const int rank = transport.rank();
  using Algorithm = std::function<Status(void*, std::size_t, int, Transport&)>;
  BroadcastOptions chain_options;
  chain_options.chain_threshold_bytes = 0;
  chain_options.segment_bytes = segment_bytes;
  const std::vector<std::pair<std::string, Algorithm>> algorithms = {
      {"binomial broadcast", binomial_broadcast},
      {fmt::format("chain broadcast, segment_bytes {}", segment_bytes),
       [segment_bytes](void* buf, std::size_t n, int root, Transport& t) {
         return chain_broadcast(buf, n, root, t, segment_bytes);
       }},
      {"broadcast() with defaults",
       [](void* buf, std::size_t n, int root, Transport& t) { return broadcast(buf, n, root, t); }},
  };
  for (const auto& [algorithm_name, algorithm] : algorithms) {
    for (int root = 0; root < transport.size(); ++root) {
      std::vector<unsigned char> data(static_cast<std::size_t>(bytes));
      for (int64_t i = 0; i < bytes; ++i) data[static_cast<std::size_t>(i)] = pattern(rank, i);
      const Status status = algorithm(data.data(), data.size(), root, transport);
      check_elements(
          tally, fmt::format("{} {} of {} bytes from root {}", name, algorithm_name, bytes, root),
          status, data, [root](int64_t i) { return pattern(root, i); });
    }
  }
}

int32_t spread_value(int rank, int64_t i) {
  return static_cast<int32_t>((i * 37 + rank * 101) % 211) - 105;
}

// Float32 sum of (r + 1) + (i % 7), exact: p(p + 1)/2 + p (i % 7); and int32
// max of spread_value. Rank r checks its block, global indices from the sum
// of counts[0..r).
void test_reducescatter(Tally& tally, Transport& transport, const std::string& name,
                        const std::vector<int64_t>& counts, std::size_t segment_bytes) {
  const int p = transport.size();
  const int rank = transport.rank();
  const int64_t total = prefix_sum(counts, p);
  const int64_t offset = prefix_sum(counts, rank);
  const auto own = static_cast<std::size_t>(counts[static_cast<std::size_t>(rank)]);
  const std::string where =
      fmt::format("{} reducescatter of {} elements, segment_bytes {}", name, total, segment_bytes);

  std::vector<float> floats(static_cast<std::size_t>(total));
  for (int64_t i = 0; i < total; ++i) {
    floats[static_cast<std::size_t>(i)] = static_cast<float>(rank + 1 + i % 7);
  }
  std::vector<float> float_block(own);
  const Status float_status =
      ring_reducescatter(floats.data(), float_block.data(), counts, sizeof(float), kFloatSum,
                         transport, segment_bytes);
  check_elements(tally, where + " float32 sum", float_status, float_block, [&](int64_t j) {
    return static_cast<float>(p * (p + 1) / 2 + p * ((offset + j) % 7));
  });

  std::vector<int32_t> ints(static_cast<std::size_t>(total));
  for (int64_t i = 0; i < total; ++i) ints[static_cast<std::size_t>(i)] = spread_value(rank, i);
  std::vector<int32_t> int_block(own);
  const Status int_status = ring_reducescatter(
      ints.data(), int_block.data(), counts, sizeof(int32_t), kInt32Max, transport, segment_bytes);
  check_elements(tally, where + " int32 max", int_status, int_block, [&](int64_t j) {
    int32_t max = spread_value(0, offset + j);
    for (int r = 1; r < p; ++r) max = std::max(max, spread_value(r, offset + j));
    return max;
  });
}

// count(s, d) bytes go from rank s to rank d, byte j being pattern(s * 16 +
// d, j); rank r's output is the blocks from sources 0..p-1 in order.
void test_alltoallv(Tally& tally, Transport& transport, const std::string& name,
                    const std::string& split, const std::function<int64_t(int, int)>& count) {
  const int p = transport.size();
  const int rank = transport.rank();
  std::vector<int64_t> send_bytes;
  std::vector<int64_t> recv_bytes;
  std::vector<unsigned char> input;
  for (int peer = 0; peer < p; ++peer) {
    send_bytes.push_back(count(rank, peer));
    recv_bytes.push_back(count(peer, rank));
    for (int64_t j = 0; j < send_bytes.back(); ++j) input.push_back(pattern(rank * 16 + peer, j));
  }
  std::vector<unsigned char> output(static_cast<std::size_t>(prefix_sum(recv_bytes, p)), 0xEE);
  const Status status =
      pairwise_alltoallv(input.data(), send_bytes, output.data(), recv_bytes, transport);
  check_elements(tally, fmt::format("{} alltoallv, {}", name, split), status, output,
                 [&](int64_t i) {
                   int source = 0;
                   while (i >= recv_bytes[static_cast<std::size_t>(source)]) {
                     i -= recv_bytes[static_cast<std::size_t>(source++)];
                   }
                   return pattern(source * 16 + rank, i);
                 });
}

// Rank 0 expects 5 bytes from rank 1, which sends 4: rank 0's alltoallv must
// fail with both lengths, every other rank succeed. One message per pair, so
// the ranks stay matched afterwards.
void test_alltoallv_wrong_length(Tally& tally, Transport& transport, const std::string& name) {
  const int p = transport.size();
  const int rank = transport.rank();
  if (p < 2) return;
  const std::string test_case = name + " alltoallv where rank 0 expects 5 bytes from rank 1";
  std::vector<int64_t> send_bytes(static_cast<std::size_t>(p), 4);
  std::vector<int64_t> recv_bytes(static_cast<std::size_t>(p), 4);
  if (rank == 0) recv_bytes[1] = 5;
  std::vector<unsigned char> input(static_cast<std::size_t>(4 * p), 1);
  std::vector<unsigned char> output(static_cast<std::size_t>(4 * p + 1));
  const Status status =
      pairwise_alltoallv(input.data(), send_bytes, output.data(), recv_bytes, transport);
  if (rank != 0) {
    if (tally.expect_ok(test_case, status)) tally.pass();
    return;
  }
  const std::string expected_text =
      fmt::format("pairwise alltoallv exchange step {} (rank 0, recv from 1): ", p - 1);
  if (status.is_ok()) {
    tally.fail(test_case, "expected an error, actual OK");
  } else if (status.message().rfind(expected_text, 0) != 0 ||
             status.message().find("5 bytes") == std::string::npos) {
    tally.fail(test_case, fmt::format("expected an error starting \"{}\" naming 5 bytes, actual "
                                      "\"{}\"",
                                      expected_text, status.message()));
  } else {
    tally.pass();
  }
}

// `small`: only the cases whose messages stay small (a 7-byte limit makes a
// piece of every 7 bytes).
void run_all(Tally& tally, MPI_Comm comm, std::size_t max_message_bytes, bool small) {
  MpiTransport transport(comm, max_message_bytes);
  const int p = transport.size();
  const std::string name = max_message_bytes == kMaxMpiMessageBytes
                               ? std::string("default limit:")
                               : fmt::format("max_message_bytes {}:", max_message_bytes);
  const std::vector<int64_t> totals =
      small ? std::vector<int64_t>{0, 7, 1000} : std::vector<int64_t>{0, 7, 1000, kLarge};

  for (std::size_t segment_bytes : {std::size_t{3}, std::size_t{4096}, kDefaultSegmentBytes}) {
    test_allgatherv(tally, transport, name, uneven_counts(p), segment_bytes);
    for (int64_t total : totals) {
      // Three-byte segments of 2^20 bytes make 3 * 10^5 messages: skip.
      if (total == kLarge && segment_bytes == 3) continue;
      test_allgatherv(tally, transport, name, chunk_counts(total, p), segment_bytes);
    }
  }

  for (int64_t bytes : totals) {
    test_broadcast(tally, transport, name, bytes, bytes == kLarge ? 4096 : 3);
  }

  for (std::size_t segment_bytes : {std::size_t{4}, std::size_t{4096}, kDefaultSegmentBytes}) {
    test_reducescatter(tally, transport, name, uneven_counts(p), segment_bytes);
    for (int64_t total : totals) {
      if (total == kLarge && segment_bytes == 4) continue;
      test_reducescatter(tally, transport, name, chunk_counts(total, p), segment_bytes);
    }
  }

  test_alltoallv(tally, transport, name, "(7s + 3d) % 5 bytes",
                 [](int s, int d) { return int64_t{(7 * s + 3 * d) % 5}; });
  test_alltoallv(tally, transport, name, "all empty", [](int, int) { return int64_t{0}; });
  test_alltoallv(tally, transport, name, "1000 + s - d bytes",
                 [](int s, int d) { return int64_t{1000 + s - d}; });
  if (!small) {
    test_alltoallv(tally, transport, name, "2^20 + 3 bytes a rank, rotated chunks",
                   [p](int s, int d) { return chunk_range(kLarge, p, (s + d) % p).count; });
  }
  test_alltoallv_wrong_length(tally, transport, name);
}

}  // namespace
}  // namespace herd::collectives

int main(int argc, char** argv) {
  using namespace herd::collectives;
  return testing::run_raw_mpi_test(argc, argv, "test_mpi_collectives",
                                   [](testing::Tally& tally, MPI_Comm comm) {
                                     run_all(tally, comm, 7, /*small=*/true);
                                     run_all(tally, comm, kMaxMpiMessageBytes, /*small=*/false);
                                   });
}
