// The collectives layer over real MPI, without the runtime: point-to-point
// rings, ring and recursive-doubling allreduce, and MpiTransport's failure
// modes, each over a transport with the default message limit, one with a
// 7-byte limit so that every message is split into many MPI messages (counts
// up to 1023 there), and one
// with 16-byte eager pieces, so that messages of 17 to 32 bytes go as two.
// Also: what the eager pieces look like on the wire, and the eager limit read
// from Open MPI (the expected value comes from the command line, where ctest
// sets the MCA parameter).
//
// A plain program run under mpiexec at 1..4 ranks. Each failure prints rank,
// case, index, expected and actual; the last line of each rank is
// "test_mpi_transport rank R: N passed, M failed", and the program exits
// non-zero if any rank failed.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <mpi.h>

#include "collectives/allreduce.h"
#include "collectives/mpi/eager_limit.h"
#include "collectives/mpi/mpi_transport.h"
#include "ops/reduce.h"
#include "raw_mpi_test_util.h"

namespace herd::collectives {
namespace {

constexpr int kPassTag = 7001;
constexpr int kWrongLengthTag = 7002;
constexpr int kEagerPiecesTag = 7003;
constexpr std::size_t kTestEagerPieceBytes = 16;

using testing::check_elements;
using testing::kFloatSum;
using testing::kInt32Max;
using testing::Tally;

// Every rank sends `bytes` bytes to its right neighbour and receives its left
// neighbour's; byte i of rank r is (r * 31 + i) mod 251.
void test_ring_pass(Tally& tally, Transport& transport, std::size_t bytes,
                    const std::string& name) {
  const int p = transport.size();
  const int rank = transport.rank();
  const int left = (rank + p - 1) % p;
  auto pattern = [](int r, int64_t i) { return static_cast<unsigned char>((r * 31 + i) % 251); };
  std::vector<unsigned char> sent(bytes);
  for (std::size_t i = 0; i < bytes; ++i) sent[i] = pattern(rank, static_cast<int64_t>(i));
  std::vector<unsigned char> received(bytes, 0);
  const std::string test_case = fmt::format("{} ring pass of {} bytes", name, bytes);
  auto receive = transport.irecv(received.data(), bytes, left, kPassTag);
  auto send = transport.isend(sent.data(), bytes, (rank + 1) % p, kPassTag);
  const Status sent_status = send->wait();
  const Status received_status = receive->wait();
  if (!tally.expect_ok(test_case + " (send)", sent_status)) return;
  if (!tally.expect_ok(test_case + " (recv)", received_status)) return;
  check_elements(tally, test_case, received, [&](int64_t i) { return pattern(left, i); });
}

int32_t spread_value(int rank, int64_t i) {
  return static_cast<int32_t>((i * 37 + rank * 101) % 211) - 105;
}

using Algorithm = Status (*)(void*, int64_t, std::size_t, const ops::ReduceFn&, Transport&,
                             std::size_t);

Status run_ring(void* buf, int64_t count, std::size_t element_size, const ops::ReduceFn& reduce,
                Transport& transport, std::size_t segment_bytes) {
  return ring_allreduce(buf, count, element_size, reduce, transport, segment_bytes);
}
Status run_recursive_doubling(void* buf, int64_t count, std::size_t element_size,
                              const ops::ReduceFn& reduce, Transport& transport, std::size_t) {
  return recursive_doubling_allreduce(buf, count, element_size, reduce, transport);
}

// Float32 sum of (r + 1) + (i % 7), exact: p(p + 1)/2 + p (i % 7); and int32
// max of spread_value, its maximum over ranks computed here.
void test_allreduce(Tally& tally, Transport& transport, const std::string& name,
                    Algorithm algorithm, int64_t count, std::size_t segment_bytes) {
  const int p = transport.size();
  const int rank = transport.rank();
  const std::string where = fmt::format("{} count {} segment_bytes {}", name, count, segment_bytes);
  const std::size_t n = static_cast<std::size_t>(count);

  std::vector<float> floats(n);
  for (std::size_t i = 0; i < n; ++i) floats[i] = static_cast<float>(rank + 1 + i % 7);
  if (tally.expect_ok(where + " float32 sum", algorithm(floats.data(), count, sizeof(float),
                                                        kFloatSum, transport, segment_bytes))) {
    check_elements(tally, where + " float32 sum", floats,
                   [p](int64_t i) { return static_cast<float>(p * (p + 1) / 2 + p * (i % 7)); });
  }

  std::vector<int32_t> ints(n);
  for (std::size_t i = 0; i < n; ++i) ints[i] = spread_value(rank, static_cast<int64_t>(i));
  if (tally.expect_ok(where + " int32 max", algorithm(ints.data(), count, sizeof(int32_t),
                                                      kInt32Max, transport, segment_bytes))) {
    check_elements(tally, where + " int32 max", ints, [p](int64_t i) {
      int32_t max = spread_value(0, i);
      for (int r = 1; r < p; ++r) max = std::max(max, spread_value(r, i));
      return max;
    });
  }
}

// Sums of non-integers depend on the order of the additions: every rank must
// still end with rank 0's bits.
void test_bit_identical(Tally& tally, Transport& transport, MPI_Comm comm, const std::string& name,
                        Algorithm algorithm) {
  const int64_t count = 1023;
  const std::string test_case = fmt::format("{} bit-identical float32 sum", name);
  std::vector<float> data(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    data[static_cast<std::size_t>(i)] =
        static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.3 * transport.rank()) / 3.0);
  }
  const bool ok = tally.expect_ok(
      test_case, algorithm(data.data(), count, sizeof(float), kFloatSum, transport, 20));
  std::vector<float> rank0 = data;
  MPI_Bcast(rank0.data(), static_cast<int>(count), MPI_FLOAT, 0, comm);
  if (!ok) return;
  for (std::size_t i = 0; i < data.size(); ++i) {
    if (std::memcmp(&data[i], &rank0[i], sizeof(float)) != 0) {
      tally.fail(test_case, fmt::format("index {}: expected rank 0's {:.9g}, actual {:.9g}", i,
                                        rank0[i], data[i]));
      return;
    }
  }
  tally.pass();
}

// Rank r and r ^ 1 (or r itself, the last of an odd count) each send the
// other 10 bytes and receive 12, then send 12 and receive 10: both receives
// must fail with a Status, and the sends succeed. Every send matches one
// receive with as many pieces, so the ranks stay matched afterwards. Open MPI
// truncates an overlong message to oneself silently, so a rank paired with
// itself only checks the short message.
void test_wrong_length(Tally& tally, Transport& transport, const std::string& name) {
  const int p = transport.size();
  const int rank = transport.rank();
  const int partner = (rank ^ 1) < p ? (rank ^ 1) : rank;
  using Lengths = std::pair<std::size_t, std::size_t>;  // sent, expected
  std::vector<Lengths> cases = {{10, 12}};
  if (partner != rank) cases.push_back({12, 10});
  std::vector<unsigned char> out(12, 1);
  std::vector<unsigned char> in(12, 0);
  for (const auto& [sent, expected] : cases) {
    const std::string test_case =
        fmt::format("{} receive of {} bytes from a send of {}", name, expected, sent);
    auto receive = transport.irecv(in.data(), expected, partner, kWrongLengthTag);
    auto send = transport.isend(out.data(), sent, partner, kWrongLengthTag);
    const Status send_status = send->wait();
    const Status receive_status = receive->wait();
    tally.expect_ok(test_case + " (send)", send_status);
    const std::string expected_text =
        fmt::format("MPI recv of {} bytes from rank {}", expected, partner);
    if (receive_status.is_ok()) {
      tally.fail(test_case, "expected an error, actual OK");
    } else if (receive_status.message().find(expected_text) == std::string::npos) {
      tally.fail(test_case, fmt::format("expected an error containing \"{}\", actual \"{}\"",
                                        expected_text, receive_status.message()));
    } else {
      tally.pass();
    }
  }
}

// A send to a rank outside the communicator fails when posted, with a
// message naming the transfer, the call, where it was made and MPI's error.
void test_bad_peer(Tally& tally, Transport& transport, const std::string& name) {
  const std::string test_case = name + " send to rank size()";
  char byte = 0;
  const Status status = transport.isend(&byte, 1, transport.size(), kPassTag)->wait();
  const std::string transfer =
      fmt::format("MPI send of 1 bytes from rank {} to rank {} with tag {}: ", transport.rank(),
                  transport.size(), kPassTag);
  const std::vector<std::string> parts = {transfer, "MPI_Isend(", " failed at ",
                                          "collectives/mpi/mpi_transport.cc:", "MPI_ERR_RANK"};
  const bool has_parts = std::all_of(parts.begin(), parts.end(), [&](const std::string& part) {
    return status.message().find(part) != std::string::npos;
  });
  if (!status.is_ok() && status.message().rfind(transfer, 0) == 0 && has_parts) {
    tally.pass();
  } else {
    tally.fail(test_case, fmt::format("expected \"{}MPI_Isend(...) failed at "
                                      "collectives/mpi/mpi_transport.cc:<line>: MPI_ERR_RANK...\", "
                                      "actual \"{}\"",
                                      transfer, status.message()));
  }
}

// With 16-byte eager pieces, rank 0 sends rank 1 messages of 16, 17, 32 and
// 33 bytes, which rank 1 receives with plain MPI_Recv: it must see one MPI
// message of 16, two of 16 and 1, two of 16 and 16, and one of 33 (beyond two
// pieces the message stays whole).
void test_eager_pieces_on_the_wire(Tally& tally, MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (size < 2 || rank > 1) return;
  MpiTransport transport(comm, kMaxMpiMessageBytes, kTestEagerPieceBytes);
  const std::vector<std::pair<std::size_t, std::vector<int>>> cases = {
      {16, {16}}, {17, {16, 1}}, {32, {16, 16}}, {33, {33}}};
  std::vector<unsigned char> bytes(64, 5);
  for (const auto& [message, pieces] : cases) {
    const std::string test_case = fmt::format("eager pieces: a {}-byte message", message);
    if (rank == 0) {
      tally.expect_ok(test_case + " (send)",
                      transport.isend(bytes.data(), message, 1, kEagerPiecesTag)->wait());
      continue;
    }
    std::vector<int> seen;
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      MPI_Status status;
      MPI_Recv(bytes.data(), static_cast<int>(bytes.size()), MPI_BYTE, 0, kEagerPiecesTag, comm,
               &status);
      int count = 0;
      MPI_Get_count(&status, MPI_BYTE, &count);
      seen.push_back(count);
    }
    if (seen == pieces) {
      tally.pass();
    } else {
      tally.fail(test_case, fmt::format("expected MPI messages of [{}] bytes, actual [{}]",
                                        fmt::join(pieces, ", "), fmt::join(seen, ", ")));
    }
  }
}

// agree_eager_piece_bytes: auto gives Open MPI's shared-memory eager limit
// less the header allowance (expected_limit, from the command line, is the
// limit ctest set through OMPI_MCA_btl_vader_eager_limit; 0 skips that
// check), every rank the same; a configured value is taken as is, and the
// smallest one wins.
void test_agree_eager_piece_bytes(Tally& tally, MPI_Comm comm, std::size_t expected_limit) {
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  if (expected_limit > 0 && size > 1) {
    const std::size_t agreed = agree_eager_piece_bytes(comm, -1);
    const std::size_t expected = expected_limit - kEagerHeaderAllowance;
    if (agreed == expected) {
      tally.pass();
    } else {
      tally.fail("agree_eager_piece_bytes(auto)",
                 fmt::format("expected {} (eager limit {} less {}), actual {}", expected,
                             expected_limit, kEagerHeaderAllowance, agreed));
    }
  }
  const std::size_t configured = agree_eager_piece_bytes(comm, 1000 + rank);
  if (configured == 1000) {
    tally.pass();
  } else {
    tally.fail("agree_eager_piece_bytes(1000 + rank)",
               fmt::format("expected the smallest, 1000, actual {}", configured));
  }
  const std::size_t off = agree_eager_piece_bytes(comm, rank == size - 1 ? 0 : 4000);
  if (off == 0) {
    tally.pass();
  } else {
    tally.fail("agree_eager_piece_bytes(0 on the last rank)",
               fmt::format("expected 0, actual {}", off));
  }
  // A number on rank 0 only, auto elsewhere: rank 0 must still take part in
  // the collectives that auto makes. The smallest wins, against what auto
  // gives when every rank is at auto.
  const std::size_t all_auto = agree_eager_piece_bytes(comm, -1);
  for (const int64_t mine : {int64_t{1000}, int64_t{1} << 40}) {
    const std::size_t mixed = agree_eager_piece_bytes(comm, rank == 0 ? mine : -1);
    const std::size_t expected = size == 1 ? static_cast<std::size_t>(mine)
                                           : std::min(static_cast<std::size_t>(mine), all_auto);
    if (mixed == expected) {
      tally.pass();
    } else {
      tally.fail(
          fmt::format("agree_eager_piece_bytes({} on rank 0, auto elsewhere)", mine),
          fmt::format("expected {} (auto alone gives {}), actual {}", expected, all_auto, mixed));
    }
  }
}

void run_all(Tally& tally, MPI_Comm comm, std::size_t max_message_bytes,
             std::size_t eager_piece_bytes) {
  MpiTransport transport(comm, max_message_bytes, eager_piece_bytes);
  const std::string name = eager_piece_bytes > 0
                               ? fmt::format("eager pieces of {} bytes:", eager_piece_bytes)
                           : max_message_bytes == kMaxMpiMessageBytes
                               ? std::string("default limit:")
                               : fmt::format("max_message_bytes {}:", max_message_bytes);
  test_ring_pass(tally, transport, 1000, name);
  test_ring_pass(tally, transport, 0, name);
  for (std::size_t bytes : {std::size_t{17}, std::size_t{31}, std::size_t{32}, std::size_t{33}}) {
    test_ring_pass(tally, transport, bytes, name);
  }
  for (int64_t count :
       {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1023}, (int64_t{1} << 20) + 3}) {
    // Under the 7-byte limit 1023 floats already split every message into
    // hundreds of pieces; 2^20+3 would be hundreds of thousands a step.
    if (max_message_bytes == 7 && count > 1023) continue;
    // One-float segments make a message per element: keep them to the small
    // counts.
    const std::size_t tiny_segment_bytes = count <= 1023 ? 4 : 4096;
    for (std::size_t segment_bytes : {kDefaultSegmentBytes, tiny_segment_bytes}) {
      test_allreduce(tally, transport, name + " ring", run_ring, count, segment_bytes);
    }
    test_allreduce(tally, transport, name + " recursive doubling", run_recursive_doubling, count,
                   0);
  }
  test_bit_identical(tally, transport, comm, name + " ring", run_ring);
  test_bit_identical(tally, transport, comm, name + " recursive doubling", run_recursive_doubling);
  test_bad_peer(tally, transport, name);
  test_wrong_length(tally, transport, name);
}

}  // namespace
}  // namespace herd::collectives

int main(int argc, char** argv) {
  using namespace herd::collectives;
  // argv[1]: the shared-memory eager limit the test was launched with.
  const std::size_t expected_limit =
      argc > 1 ? static_cast<std::size_t>(std::strtoull(argv[1], nullptr, 10)) : 0;
  return testing::run_raw_mpi_test(
      argc, argv, "test_mpi_transport", [expected_limit](testing::Tally& tally, MPI_Comm comm) {
        for (std::size_t max_message_bytes : {std::size_t{7}, kMaxMpiMessageBytes}) {
          run_all(tally, comm, max_message_bytes, 0);
        }
        run_all(tally, comm, kMaxMpiMessageBytes, kTestEagerPieceBytes);
        test_eager_pieces_on_the_wire(tally, comm);
        test_agree_eager_piece_bytes(tally, comm, expected_limit);
      });
}
