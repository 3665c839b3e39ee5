#include "collectives/shm/line_mode.h"

#include <algorithm>
#include <cstdint>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace herd::collectives {
namespace {

constexpr std::size_t kCacheLineBytes = 64;
// Weight of the newest call in a mode's estimate: half, so that one noisy
// call does not decide alone, and a changed state shows within two calls.
constexpr double kNewestWeight = 0.5;

std::size_t index(ShmLineMode mode) { return static_cast<std::size_t>(mode); }

ShmLineMode other(ShmLineMode mode) {
  return mode == ShmLineMode::kKeep ? ShmLineMode::kEvict : ShmLineMode::kKeep;
}

}  // namespace

#if defined(__x86_64__)
namespace {

bool cpu_has_clflushopt() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  // CPUID leaf 7, sub-leaf 0: EBX bit 23 is CLFLUSHOPT.
  return __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) != 0 && (ebx & (1u << 23)) != 0;
}

__attribute__((target("clflushopt"))) void flush_lines_unordered(uintptr_t first, uintptr_t end) {
  for (uintptr_t line = first; line < end; line += kCacheLineBytes) {
    _mm_clflushopt(reinterpret_cast<void*>(line));
  }
}

void flush_lines_ordered(uintptr_t first, uintptr_t end) {
  for (uintptr_t line = first; line < end; line += kCacheLineBytes) {
    _mm_clflush(reinterpret_cast<void*>(line));
  }
}

}  // namespace

void evict_lines(const void* data, std::size_t bytes) {
  // clflushopt lets the flushes overlap; CPUs without it have clflush (SSE2).
  static const bool has_clflushopt = cpu_has_clflushopt();
  const auto first = reinterpret_cast<uintptr_t>(data) / kCacheLineBytes * kCacheLineBytes;
  const auto end = reinterpret_cast<uintptr_t>(data) + bytes;
  if (has_clflushopt) {
    flush_lines_unordered(first, end);
  } else {
    flush_lines_ordered(first, end);
  }
  _mm_sfence();
}
#else
void evict_lines(const void*, std::size_t) {}
#endif

int ShmModeChooser::size_class(std::size_t bytes) {
  int size_class = 0;
  for (std::size_t limit = kShmAdaptiveMinBytes * 4;
       bytes >= limit && size_class + 1 < kSizeClasses; limit *= 4) {
    ++size_class;
  }
  return size_class;
}

ShmLineMode ShmModeChooser::choose(std::size_t bytes) {
  if (!adapts(bytes)) return ShmLineMode::kKeep;
  SizeClass& size_class = classes_[static_cast<std::size_t>(ShmModeChooser::size_class(bytes))];
  ++size_class.calls;
  size_class.probing = false;
  const auto& estimate = size_class.seconds_per_byte;
  // Each mode is measured once before any comparison.
  if (estimate[index(ShmLineMode::kKeep)] < 0) return ShmLineMode::kKeep;
  if (estimate[index(ShmLineMode::kEvict)] < 0) return ShmLineMode::kEvict;
  const ShmLineMode faster =
      estimate[index(ShmLineMode::kEvict)] < estimate[index(ShmLineMode::kKeep)]
          ? ShmLineMode::kEvict
          : ShmLineMode::kKeep;
  if (++size_class.calls_since_probe < size_class.probe_interval) return faster;
  size_class.calls_since_probe = 0;
  size_class.probing = true;
  return other(faster);
}

void ShmModeChooser::record(std::size_t bytes, ShmLineMode mode, double seconds) {
  if (!adapts(bytes)) return;
  SizeClass& size_class = classes_[static_cast<std::size_t>(ShmModeChooser::size_class(bytes))];
  auto& estimate = size_class.seconds_per_byte;
  int64_t& last_call = size_class.last_call[index(mode)];
  const double newest = seconds / static_cast<double>(bytes);
  // A mode that ran in the call before has a current estimate to smooth;
  // one that ran only as a probe long ago has a stale one, which the newest
  // call replaces.
  const bool current = last_call >= 0 && size_class.calls - last_call <= 1;
  estimate[index(mode)] =
      current ? kNewestWeight * newest + (1 - kNewestWeight) * estimate[index(mode)] : newest;
  last_call = size_class.calls;
  if (size_class.probing) {
    size_class.probing = false;
    const bool changed = estimate[index(mode)] < estimate[index(other(mode))];
    size_class.probe_interval =
        changed ? kShmProbeInterval : std::min(2 * size_class.probe_interval, kShmMaxProbeInterval);
  }
}

}  // namespace herd::collectives
