// The direct path of the shared-memory allreduce (registered memory,
// collectives/shm/shm_allreduce.h) with threads as ranks, each mapping the
// others' shared buffers through /proc/<pid>/fd/<fd> of this process: the
// registry's lookups; results bit for bit in the reduction order (computed
// independently) for 2 to 4 ranks, sizes from below the minimum past several
// chunks, odd counts, in place and out of place; that registered calls do
// take it (with every cross-memory read refused, the single-copy path would
// fail) and that a call with one rank unregistered, or a buffer some rank
// cannot map, takes the other paths on every rank and stays exact; a buffer
// released and another allocated at the same fd is mapped anew.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "collectives/shm/shared_buffer_registry.h"
#include "collectives/shm/shm_allreduce.h"
#include "collectives_test_util.h"
#include "reduction_order_reference.h"
#include "shm_heap_area.h"

namespace herd::collectives {
namespace {

using testing::float_sum;
using testing::order_sensitive_sum;
using testing::order_sensitive_value;

constexpr std::size_t kSlotBytes = 64 * 1024;

// The group area of p thread-ranks, as make_node_shm leaves it.
using Area = testing::HeapArea;

// Floats in a shared buffer (registered) or on the heap. Made on the
// thread-ranks, where Catch's assertions may not run: status() says whether
// the shared buffer was allocated.
class Floats {
 public:
  Floats(std::size_t count, bool registered) : count_(count) {
    if (registered) {
      status_ = allocate_shared_buffer(std::max<std::size_t>(count, 1) * sizeof(float), &shared_);
    } else {
      heap_.resize(count);
    }
  }
  ~Floats() {
    if (shared_.data != nullptr) release_shared_buffer(shared_.data);
  }
  Floats(const Floats&) = delete;
  Floats& operator=(const Floats&) = delete;
  float* data() {
    return shared_.data != nullptr ? static_cast<float*>(shared_.data) : heap_.data();
  }
  int fd() const { return shared_.fd; }
  const Status& status() const { return status_; }

 private:
  std::size_t count_;
  Status status_ = Status::ok();
  SharedBufferAllocation shared_;
  std::vector<float> heap_;
};

ssize_t refuse_read(pid_t, const iovec*, unsigned long, const iovec*, unsigned long,
                    unsigned long) {
  errno = EPERM;
  return -1;
}

struct Options {
  bool in_place = true;
  // Rank r's buffers are shared buffers when registered(r).
  std::function<bool(int rank)> registered = [](int) { return true; };
  // Every cross-memory read refused and single copy for every size: a call
  // that does not take the direct path (or the slots) fails.
  bool single_copy_refused = false;
  // Called by each rank after allocating its buffers of a call, before it;
  // returns what went wrong, or "".
  std::function<std::string(int rank, int call, Floats& buffer)> before_call;
};

// Runs one call per count on p thread-ranks, rank r's input
// order_sensitive_value(r + call, i); "" when every rank's every call holds
// the reduction order's sum.
std::string run_direct(int p, const std::vector<int64_t>& counts, const Options& options) {
  Area area(p, kSlotBytes);
  std::vector<std::string> errors(static_cast<std::size_t>(p));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < p; ++rank) {
    threads.emplace_back([&, rank] {
      ShmAllreduceGroup group(rank, area.regions(), kSlotBytes, std::chrono::seconds(60));
      group.set_direct_min_bytes(kShmDirectMinBytes);
      if (options.single_copy_refused) {
        group.set_single_copy_bytes(0, SIZE_MAX);
        group.set_cross_memory_read(&refuse_read);
      }
      std::string& error = errors[static_cast<std::size_t>(rank)];
      for (std::size_t c = 0; c < counts.size(); ++c) {
        const auto n = static_cast<std::size_t>(counts[c]);
        const int call = static_cast<int>(c);
        Floats input(n, options.registered(rank));
        Floats output(n, options.registered(rank));
        std::string setup_error;
        for (const Floats* buffer : {&input, &output}) {
          if (!buffer->status().is_ok()) setup_error = buffer->status().message();
        }
        if (setup_error.empty()) {
          for (std::size_t i = 0; i < n; ++i) {
            input.data()[i] = order_sensitive_value(rank + call, static_cast<int64_t>(i));
          }
          if (options.before_call) setup_error = options.before_call(rank, call, input);
        }
        if (!setup_error.empty()) {
          // The other ranks' call then fails on the stall timeout.
          if (error.empty()) error = fmt::format("rank {} call {}: {}", rank, c, setup_error);
          continue;
        }
        float* out = options.in_place ? input.data() : output.data();
        const Status status =
            group.allreduce(input.data(), out, counts[c], sizeof(float), float_sum(), {}, 0);
        if (!status.is_ok()) {
          if (error.empty()) error = fmt::format("rank {} call {}: {}", rank, c, status.message());
          continue;
        }
        for (std::size_t i = 0; i < n && error.empty(); ++i) {
          const float want = testing::reduction_order_reference<float>(
              p, [&](int r) { return order_sensitive_value(r + call, static_cast<int64_t>(i)); },
              testing::add_floats);
          if (std::memcmp(&out[i], &want, sizeof(float)) != 0) {
            error = fmt::format("rank {} call {} ({} floats) index {}: expected {}, actual {}",
                                rank, c, n, i, want, out[i]);
          }
          if (!options.in_place &&
              input.data()[i] != order_sensitive_value(rank + call, static_cast<int64_t>(i))) {
            error = fmt::format("rank {} call {}: input changed at {}", rank, c, i);
          }
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (const std::string& error : errors) {
    if (!error.empty()) return error;
  }
  return "";
}

// From below the minimum, through odd counts and shares short of a cache
// line, to several chunks.
const std::vector<int64_t> kCounts = {
    1000,
    static_cast<int64_t>(kShmDirectMinBytes / sizeof(float)),
    static_cast<int64_t>(kShmDirectMinBytes / sizeof(float)) + 13,
    100003,
    static_cast<int64_t>(kShmDirectChunkBytes / sizeof(float)) * 2 + 77,
};

TEST_CASE("shared buffer registry: lookups inside one buffer, none across or outside",
          "[shm][direct]") {
  SharedBufferAllocation a;
  SharedBufferAllocation b;
  REQUIRE(allocate_shared_buffer(10000, &a).is_ok());
  REQUIRE(allocate_shared_buffer(5000, &b).is_ok());
  CHECK(a.id != 0);
  CHECK(b.id != a.id);
  auto* bytes = static_cast<uint8_t*>(a.data);
  CHECK(std::all_of(bytes, bytes + a.bytes, [](uint8_t v) { return v == 0; }));
  const auto found = find_shared_buffer(bytes + 100, 9900);
  REQUIRE(found.has_value());
  CHECK(found->id == a.id);
  CHECK(found->fd == a.fd);
  CHECK(found->offset == 100);
  CHECK_FALSE(find_shared_buffer(bytes + 100, 9901).has_value());
  int local = 0;
  CHECK_FALSE(find_shared_buffer(&local, sizeof(local)).has_value());
  const auto second = find_shared_buffer(b.data, b.bytes);
  REQUIRE(second.has_value());
  CHECK(second->id == b.id);
  release_shared_buffer(a.data);
  CHECK_FALSE(find_shared_buffer(bytes + 100, 4).has_value());
  release_shared_buffer(b.data);
  CHECK_FALSE(allocate_shared_buffer(0, &a).is_ok());
}

TEST_CASE("shm allreduce direct: the reduction order's bits, 2 to 4 ranks, in place and not",
          "[shm][allreduce][direct][reduction_order][sweep]") {
  for (const int p : {2, 3, 4}) {
    for (const bool in_place : {true, false}) {
      INFO("ranks " << p << (in_place ? " in place" : " out of place"));
      Options options;
      options.in_place = in_place;
      CHECK(run_direct(p, kCounts, options).empty());
    }
  }
}

TEST_CASE("shm allreduce direct: registered calls take it, not the single-copy reads",
          "[shm][allreduce][direct]") {
  Options options;
  options.single_copy_refused = true;
  const std::vector<int64_t> counts = {kCounts[1], kCounts[3]};
  CHECK(run_direct(3, counts, options).empty());
  // The same calls with rank 1 unregistered read with process_vm_readv.
  options.registered = [](int rank) { return rank != 1; };
  CHECK_THAT(run_direct(3, counts, options), Catch::Contains("process_vm_readv"));
}

TEST_CASE("shm allreduce direct: one rank unregistered, every rank takes the slots, exactly",
          "[shm][allreduce][direct]") {
  for (const bool in_place : {true, false}) {
    Options options;
    options.in_place = in_place;
    options.registered = [](int rank) { return rank == 0; };
    CHECK(run_direct(2, kCounts, options).empty());
  }
}

// The same at 4 ranks, one of them unregistered: a sweep, as 4 threads
// through every count take minutes under the sanitizers.
TEST_CASE("shm allreduce direct: one of 4 ranks unregistered, every rank takes the slots",
          "[shm][allreduce][direct][sweep]") {
  for (const bool in_place : {true, false}) {
    Options options;
    options.in_place = in_place;
    options.registered = [](int rank) { return rank != 2; };
    CHECK(run_direct(4, kCounts, options).empty());
  }
}

TEST_CASE("shm allreduce direct: a buffer some rank cannot map sends every rank to the slots",
          "[shm][allreduce][direct]") {
  Options options;
  // Rank 1's input fd now holds /dev/null, which the others cannot map: the
  // registry still finds the buffer, mapped in rank 1 itself.
  options.before_call = [](int rank, int, Floats& input) -> std::string {
    if (rank != 1) return "";
    const int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null < 0) return "open /dev/null failed";
    const bool replaced = dup2(null, input.fd()) == input.fd();
    close(null);
    return replaced ? "" : "dup2 failed";
  };
  const std::vector<int64_t> counts = {kCounts[3]};
  CHECK(run_direct(2, counts, options).empty());
  options.single_copy_refused = true;
  CHECK_THAT(run_direct(2, counts, options), Catch::Contains("process_vm_readv"));
}

TEST_CASE("shm allreduce direct: a buffer released and another at the same fd is mapped anew",
          "[shm][allreduce][direct]") {
  // Every call allocates its buffers and releases them after: each call's
  // input lands on the fd of the last call's (the lowest free), with
  // other values, which a stale mapping would still show.
  Options options;
  std::vector<int> fds(4, -1);
  bool reused = false;
  options.before_call = [&](int rank, int call, Floats& input) -> std::string {
    if (rank != 0) return "";
    if (call > 0 && fds[static_cast<std::size_t>(call - 1)] == input.fd()) reused = true;
    fds[static_cast<std::size_t>(call)] = input.fd();
    return "";
  };
  const std::vector<int64_t> counts(4, kCounts[3]);
  CHECK(run_direct(2, counts, options).empty());
  CHECK(reused);
}

}  // namespace
}  // namespace herd::collectives
