// What the shared-memory allreduce does with the other ranks' slot lines
// once it has read them, and how rank 0 chooses it from the times of
// earlier calls.
//
// Why a choice: a slot line travels from the rank that writes it to the rank
// that reads it, and when the writer reuses the slot two chunks later its
// store must first invalidate the reader's copy. That costs little when the
// cores are close and makes the whole allreduce about three times slower when
// they are far apart, and on a virtual machine the distance can change while
// a job runs. A reader that evicts the lines it has read (clflushopt) spares
// the writer that invalidation, at the price of writing the dirty lines back
// to memory, which costs the same in both cases. Neither mode wins in both,
// so rank 0 measures (docs/design/cache-line-modes.md has the figures).
//
// ShmModeChooser is pure logic, used by rank 0's ShmAllreduceGroup on the
// thread running the collective.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace herd::collectives {

enum class ShmLineMode : uint64_t {
  kKeep = 0,   // leave the lines read in the cache
  kEvict = 1,  // flush them after the chunk's copy-out
};

// Evicts the cache lines of [data, data + bytes) from every cache (x86-64:
// clflushopt; elsewhere nothing). Ordered before later stores by a fence.
void evict_lines(const void* data, std::size_t bytes);

// Buffers smaller than this always keep their lines: the barriers, not the
// lines, set their time.
constexpr std::size_t kShmAdaptiveMinBytes = 64 * 1024;
// The mode that looked slower is tried again (a probe) after this many calls
// of its size class, so that a change of the machine's state is noticed; a
// probe that confirms the choice doubles the wait for the next one, up to
// kShmMaxProbeInterval, and one that changes it starts again from here. A
// probe of the slower mode costs that call up to three times its time (the
// first paragraph above); a choice gone wrong shows at once, since the mode
// that runs is measured at every call.
constexpr int64_t kShmProbeInterval = 16;
constexpr int64_t kShmMaxProbeInterval = 256;

// Per size class, an estimate of seconds per byte for each mode: smoothed
// over consecutive calls in that mode, and replaced by the newest call when
// the mode last ran long ago (as a probe), whose estimate may be stale.
class ShmModeChooser {
 public:
  // The mode for a call on `bytes` bytes.
  ShmLineMode choose(std::size_t bytes);
  // What a call on `bytes` bytes in `mode` took.
  void record(std::size_t bytes, ShmLineMode mode, double seconds);

  // Whether calls on `bytes` bytes are chosen for (and worth timing): from
  // kShmAdaptiveMinBytes up; smaller ones always keep their lines.
  static bool adapts(std::size_t bytes) { return bytes >= kShmAdaptiveMinBytes; }

  // Size classes: [64 KiB, 256 KiB), [256 KiB, 1 MiB), ... and the last
  // class from 64 MiB up.
  static constexpr int kSizeClasses = 6;
  static int size_class(std::size_t bytes);

 private:
  struct SizeClass {
    // Seconds per byte of recent calls in each mode; negative: not measured.
    std::array<double, 2> seconds_per_byte{-1.0, -1.0};
    // The class's call (count of choose()) that each mode last ran in.
    std::array<int64_t, 2> last_call{-1, -1};
    int64_t calls = 0;
    int64_t calls_since_probe = 0;
    int64_t probe_interval = kShmProbeInterval;
    bool probing = false;  // the last choose() returned the slower mode
  };
  std::array<SizeClass, kSizeClasses> classes_;
};

}  // namespace herd::collectives
