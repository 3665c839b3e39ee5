// fit_to_transport (src/transport_fit.h): the settings left at auto take the
// one-machine values on a set within one host and the TCP values on a set
// spanning hosts; a value the user set stays on either; nothing else changes,
// the recursive-doubling threshold included. ring_segment_bytes reads an
// unfitted auto as 1 MiB.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "src/transport_fit.h"

namespace herd::detail {
namespace {

constexpr int64_t kMiB = 1024 * 1024;

// `hosts` hosts of `per_host` consecutive ranks each, seen from rank 0.
collectives::HostLayout layout_of(int hosts, int per_host) {
  std::vector<int> host_of;
  for (int host = 0; host < hosts; ++host) host_of.insert(host_of.end(), per_host, host);
  return collectives::host_layout_of(host_of, 0);
}

}  // namespace

TEST_CASE("transport fit: one host keeps the shared-memory values", "[transport_fit]") {
  for (int ranks : {1, 2, 4}) {
    INFO(ranks << " ranks on one host");
    const Config fitted = fit_to_transport(Config{}, layout_of(1, ranks));
    CHECK(fitted.ring_segment_bytes == 1 * kMiB);
    // Left to agree_eager_piece_bytes, and to small_allreduce_threshold.
    CHECK(fitted.eager_piece_bytes == -1);
    CHECK(fitted.small_allreduce_bytes == -1);
  }
}

TEST_CASE("transport fit: a set across hosts takes the TCP values", "[transport_fit]") {
  for (auto [hosts, per_host] : std::vector<std::pair<int, int>>{{2, 1}, {2, 2}, {4, 1}, {3, 2}}) {
    INFO(hosts << " hosts of " << per_host << " ranks");
    const Config fitted = fit_to_transport(Config{}, layout_of(hosts, per_host));
    CHECK(fitted.ring_segment_bytes == 4 * kMiB);
    CHECK(fitted.eager_piece_bytes == 0);
    // The recursive-doubling threshold stays by the number of ranks.
    CHECK(fitted.small_allreduce_bytes == -1);
  }
}

TEST_CASE("transport fit: hosts that are not laid out alike still span hosts", "[transport_fit]") {
  // Ranks 0 and 2 on one host, 1 on another: neither uniform nor contiguous.
  const Config fitted = fit_to_transport(Config{}, collectives::host_layout_of({0, 1, 0}, 1));
  CHECK(fitted.ring_segment_bytes == 4 * kMiB);
  CHECK(fitted.eager_piece_bytes == 0);
}

TEST_CASE("transport fit: a value the user set always stays", "[transport_fit]") {
  Config config;
  config.ring_segment_bytes = 12345;
  config.eager_piece_bytes = 777;
  config.small_allreduce_bytes = 0;
  for (auto [hosts, per_host] : std::vector<std::pair<int, int>>{{1, 2}, {2, 1}, {2, 2}}) {
    INFO(hosts << " hosts of " << per_host << " ranks");
    const Config fitted = fit_to_transport(config, layout_of(hosts, per_host));
    CHECK(fitted.ring_segment_bytes == 12345);
    CHECK(fitted.eager_piece_bytes == 777);
    CHECK(fitted.small_allreduce_bytes == 0);
  }
}

TEST_CASE("transport fit: the other settings pass through", "[transport_fit]") {
  Config config;
  config.fusion_threshold_bytes = 99;
  config.cycle_time_ms = 2.5;
  config.shm_allreduce_bytes = 4096;
  config.allreduce_algorithm = AllreduceAlgorithmSetting::kRing;
  config.process_sets = {{0, 1}};
  const Config fitted = fit_to_transport(config, layout_of(2, 2));
  CHECK(fitted.fusion_threshold_bytes == 99);
  CHECK(fitted.cycle_time_ms == 2.5);
  CHECK(fitted.shm_allreduce_bytes == 4096);
  CHECK(fitted.allreduce_algorithm == AllreduceAlgorithmSetting::kRing);
  CHECK(fitted.process_sets == std::vector<std::vector<int>>{{0, 1}});
}

TEST_CASE("transport fit: the segment size of a Config fitted or not", "[transport_fit]") {
  Config config;
  CHECK(ring_segment_bytes(config) == 1 << 20);  // auto, never fitted
  config.ring_segment_bytes = 12345;
  CHECK(ring_segment_bytes(config) == 12345);
  CHECK(ring_segment_bytes(fit_to_transport(Config{}, layout_of(2, 1))) == 4 << 20);
}

}  // namespace herd::detail
