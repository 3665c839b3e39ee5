// ShmModeChooser (collectives/shm/line_mode.h): size classes, small buffers
// always keeping their lines, each mode measured once before any
// comparison, the faster mode chosen, the slower one tried again every
// kShmProbeInterval calls, a change of state followed, size classes kept
// apart; and evict_lines leaving the data as it was.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/shm/line_mode.h"

namespace herd::collectives {
namespace {

constexpr std::size_t kMiB = 1 << 20;

// Records one call of `bytes` in the chosen mode, taking `keep_seconds` or
// `evict_seconds`, and returns the mode.
ShmLineMode call(ShmModeChooser& chooser, std::size_t bytes, double keep_seconds,
                 double evict_seconds) {
  const ShmLineMode mode = chooser.choose(bytes);
  chooser.record(bytes, mode, mode == ShmLineMode::kKeep ? keep_seconds : evict_seconds);
  return mode;
}

TEST_CASE("shm line mode: size classes by powers of four from 64 KiB", "[shm][line_mode]") {
  CHECK(ShmModeChooser::size_class(64 * 1024) == 0);
  CHECK(ShmModeChooser::size_class(256 * 1024 - 1) == 0);
  CHECK(ShmModeChooser::size_class(256 * 1024) == 1);
  CHECK(ShmModeChooser::size_class(kMiB) == 2);
  CHECK(ShmModeChooser::size_class(4 * kMiB) == 3);
  CHECK(ShmModeChooser::size_class(16 * kMiB) == 4);
  CHECK(ShmModeChooser::size_class(64 * kMiB) == 5);
  CHECK(ShmModeChooser::size_class(std::size_t{1} << 40) == 5);
}

TEST_CASE("shm line mode: buffers under 64 KiB always keep their lines", "[shm][line_mode]") {
  ShmModeChooser chooser;
  for (int i = 0; i < 100; ++i) {
    // Even when evicting is recorded as far faster.
    CHECK(call(chooser, kShmAdaptiveMinBytes - 1, 1.0, 1e-9) == ShmLineMode::kKeep);
  }
}

TEST_CASE("shm line mode: measures both, takes the faster, probes the other ever more rarely",
          "[shm][line_mode]") {
  ShmModeChooser chooser;
  const std::size_t bytes = 16 * kMiB;
  CHECK(call(chooser, bytes, 0.004, 0.006) == ShmLineMode::kKeep);
  CHECK(call(chooser, bytes, 0.004, 0.006) == ShmLineMode::kEvict);
  // The size class's calls count from 1, the two first included; each probe
  // that confirms the choice doubles the wait for the next, up to 256.
  std::vector<int64_t> probes;
  for (int64_t class_call = 3; class_call <= 1100; ++class_call) {
    if (call(chooser, bytes, 0.004, 0.006) == ShmLineMode::kEvict) probes.push_back(class_call);
  }
  CHECK(probes == std::vector<int64_t>{18, 50, 114, 242, 498, 754, 1010});
}

TEST_CASE("shm line mode: follows a change of the machine's state", "[shm][line_mode]") {
  ShmModeChooser chooser;
  const std::size_t bytes = 16 * kMiB;
  for (int i = 0; i < 600; ++i) call(chooser, bytes, 0.004, 0.006);
  // Keeping becomes three times slower: keeping is what runs, so the change
  // shows at once, however rare the probes have become.
  int calls_until_evict = 0;
  while (call(chooser, bytes, 0.012, 0.006) != ShmLineMode::kEvict) ++calls_until_evict;
  CHECK(calls_until_evict <= 2);
  // Back to the first state: keeping, which runs only as a probe now, is
  // found faster at its next probe at the latest.
  int calls_until_keep = 0;
  while (call(chooser, bytes, 0.004, 0.006) != ShmLineMode::kKeep) ++calls_until_keep;
  CHECK(calls_until_keep < kShmMaxProbeInterval);
  // That probe changed the choice: the next one comes after the shortest wait.
  int calls_until_probe = 1;
  while (call(chooser, bytes, 0.004, 0.006) == ShmLineMode::kKeep) ++calls_until_probe;
  CHECK(calls_until_probe == kShmProbeInterval);
}

TEST_CASE("shm line mode: size classes are measured apart", "[shm][line_mode]") {
  ShmModeChooser chooser;
  // 1 MiB: keeping is faster; 64 MiB: evicting is.
  for (int i = 0; i < 2; ++i) {
    call(chooser, kMiB, 0.0001, 0.0002);
    call(chooser, 64 * kMiB, 0.04, 0.02);
  }
  CHECK(call(chooser, kMiB, 0.0001, 0.0002) == ShmLineMode::kKeep);
  CHECK(call(chooser, 64 * kMiB, 0.04, 0.02) == ShmLineMode::kEvict);
}

TEST_CASE("evict_lines leaves the data unchanged, at any alignment and length",
          "[shm][line_mode]") {
  std::vector<uint8_t> data(10000);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  for (std::size_t offset : {0, 1, 63, 64, 65}) {
    for (std::size_t length : {0, 1, 64, 200, 4096}) {
      evict_lines(data.data() + offset, length);
    }
  }
  for (std::size_t i = 0; i < data.size(); ++i) {
    INFO("index " << i);
    REQUIRE(data[i] == static_cast<uint8_t>(i * 7));
  }
}

}  // namespace
}  // namespace herd::collectives
