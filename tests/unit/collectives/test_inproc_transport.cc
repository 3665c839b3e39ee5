// The in-process fabric as a Transport: delivery and ordering, zero-byte
// messages, and its failure modes (wrong length, nobody sends, bad peer, a
// rank that throws).
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/inproc/inproc_transport.h"

namespace herd::collectives {
namespace {

using std::chrono::milliseconds;

TEST_CASE("inproc transport delivers bytes between two ranks", "[inproc]") {
  InprocFabric fabric(2);
  auto rank0 = fabric.transport(0);
  auto rank1 = fabric.transport(1);
  CHECK(fabric.size() == 2);
  CHECK(rank1->rank() == 1);
  CHECK(rank1->size() == 2);

  const std::vector<int32_t> sent = {1, -2, 3};
  std::vector<int32_t> received(3, 0);
  auto receive = rank1->irecv(received.data(), 12, 0, 5);
  REQUIRE(rank0->isend(sent.data(), 12, 1, 5)->wait().message() == "");
  REQUIRE(receive->wait().message() == "");
  CHECK(received == sent);
  // wait() again gives the same Status.
  CHECK(receive->wait().is_ok());
}

TEST_CASE("inproc transport keeps the order of messages with one tag", "[inproc]") {
  InprocFabric fabric(2);
  auto rank0 = fabric.transport(0);
  auto rank1 = fabric.transport(1);
  for (int32_t value = 0; value < 5; ++value) {
    REQUIRE(rank0->isend(&value, sizeof(value), 1, 3)->wait().is_ok());
  }
  // Receives match in the order they were posted, even when waited the other
  // way round.
  int32_t first = -1;
  int32_t second = -1;
  auto receive_first = rank1->irecv(&first, sizeof(first), 0, 3);
  auto receive_second = rank1->irecv(&second, sizeof(second), 0, 3);
  REQUIRE(receive_second->wait().is_ok());
  REQUIRE(receive_first->wait().is_ok());
  CHECK(first == 0);
  CHECK(second == 1);
  // A receive destroyed unwaited still takes its message.
  int32_t dropped = -1;
  rank1->irecv(&dropped, sizeof(dropped), 0, 3).reset();
  CHECK(dropped == 2);
  for (int32_t expected = 3; expected < 5; ++expected) {
    int32_t value = -1;
    REQUIRE(rank1->irecv(&value, sizeof(value), 0, 3)->wait().is_ok());
    CHECK(value == expected);
  }
}

TEST_CASE("inproc transport keeps tags and sources apart", "[inproc]") {
  InprocFabric fabric(3);
  auto rank0 = fabric.transport(0);
  auto rank1 = fabric.transport(1);
  auto rank2 = fabric.transport(2);
  const char a = 'a';
  const char b = 'b';
  const char c = 'c';
  REQUIRE(rank0->isend(&a, 1, 2, 1)->wait().is_ok());
  REQUIRE(rank0->isend(&b, 1, 2, 2)->wait().is_ok());
  REQUIRE(rank1->isend(&c, 1, 2, 1)->wait().is_ok());
  char got = 0;
  REQUIRE(rank2->irecv(&got, 1, 0, 2)->wait().is_ok());
  CHECK(got == 'b');
  REQUIRE(rank2->irecv(&got, 1, 1, 1)->wait().is_ok());
  CHECK(got == 'c');
  REQUIRE(rank2->irecv(&got, 1, 0, 1)->wait().is_ok());
  CHECK(got == 'a');
}

TEST_CASE("inproc transport delivers zero-byte messages and self-sends", "[inproc]") {
  InprocFabric fabric(2, milliseconds(200));
  auto rank0 = fabric.transport(0);
  auto rank1 = fabric.transport(1);
  REQUIRE(rank0->isend(nullptr, 0, 1, 9)->wait().is_ok());
  CHECK(rank1->irecv(nullptr, 0, 0, 9)->wait().message() == "");
  // Nothing left over: a second zero-byte receive times out.
  CHECK_FALSE(rank1->irecv(nullptr, 0, 0, 9)->wait().is_ok());

  const double sent = 2.5;
  double received = 0;
  REQUIRE(rank0->isend(&sent, sizeof(sent), 0, 1)->wait().is_ok());
  REQUIRE(rank0->irecv(&received, sizeof(received), 0, 1)->wait().is_ok());
  CHECK(received == 2.5);
}

TEST_CASE("inproc receive of the wrong length fails with both lengths", "[inproc][errors]") {
  InprocFabric fabric(2, milliseconds(200));
  auto rank0 = fabric.transport(0);
  auto rank1 = fabric.transport(1);
  const std::vector<char> sent(4, 'x');
  std::vector<char> received(8, 'y');
  REQUIRE(rank0->isend(sent.data(), 4, 1, 7)->wait().is_ok());
  const Status status = rank1->irecv(received.data(), 8, 0, 7)->wait();
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("expected 8 bytes") &&
                                   Catch::Contains("message of 4 bytes") &&
                                   Catch::Contains("from rank 0 to rank 1 with tag 7"));
  // The buffer is left alone.
  CHECK(received == std::vector<char>(8, 'y'));

  REQUIRE(rank0->isend(received.data(), 8, 1, 7)->wait().is_ok());
  const Status too_long = rank1->irecv(received.data(), 3, 0, 7)->wait();
  CHECK_THAT(too_long.message(),
             Catch::Contains("expected 3 bytes") && Catch::Contains("message of 8 bytes"));
}

TEST_CASE("inproc receive that nobody sends fails after the timeout", "[inproc][errors]") {
  InprocFabric fabric(3, milliseconds(100));
  auto rank2 = fabric.transport(2);
  int32_t value = 0;
  const auto start = std::chrono::steady_clock::now();
  const Status status = rank2->irecv(&value, sizeof(value), 1, 42)->wait();
  const auto waited = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("timed out after 100 ms") &&
                                   Catch::Contains("from rank 1 to rank 2 with tag 42"));
  CHECK(waited >= milliseconds(100));
  CHECK(waited < milliseconds(5000));
}

TEST_CASE("inproc transport rejects a peer outside the fabric", "[inproc][errors]") {
  InprocFabric fabric(2, milliseconds(100));
  auto rank0 = fabric.transport(0);
  char byte = 0;
  CHECK_THAT(rank0->isend(&byte, 1, 2, 0)->wait().message(),
             Catch::Contains("cannot send to rank 2 of a fabric of 2 ranks"));
  CHECK_THAT(rank0->irecv(&byte, 1, -1, 0)->wait().message(),
             Catch::Contains("cannot receive from rank -1"));
}

TEST_CASE("run_inproc_ranks runs every rank and passes them messages", "[inproc]") {
  for (int p : {1, 2, 5, 15}) {
    std::vector<int> received_from(static_cast<std::size_t>(p), -1);
    run_inproc_ranks(p, [&](int rank, Transport& transport) {
      // Pass the rank to the right; receive the left one's.
      const int right = (rank + 1) % p;
      const int left = (rank + p - 1) % p;
      int got = -1;
      auto receive = transport.irecv(&got, sizeof(got), left, 0);
      if (!transport.isend(&rank, sizeof(rank), right, 0)->wait().is_ok()) return;
      if (receive->wait().is_ok()) received_from[static_cast<std::size_t>(rank)] = got;
    });
    for (int rank = 0; rank < p; ++rank) {
      CAPTURE(p, rank);
      CHECK(received_from[static_cast<std::size_t>(rank)] == (rank + p - 1) % p);
    }
  }
}

TEST_CASE("run_inproc_ranks rethrows what a rank throws after joining all", "[inproc][errors]") {
  std::vector<int> finished(4, 0);
  CHECK_THROWS_WITH(run_inproc_ranks(4,
                                     [&](int rank, Transport&) {
                                       if (rank == 2) throw std::runtime_error("rank 2 broke");
                                       finished[static_cast<std::size_t>(rank)] = 1;
                                     }),
                    "rank 2 broke");
  CHECK(finished == std::vector<int>{1, 1, 0, 1});
}

}  // namespace
}  // namespace herd::collectives
