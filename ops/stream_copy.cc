#include "ops/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace herd::ops {

void stream_copy(void* dst, const void* src, std::size_t bytes) {
  if (bytes == 0) return;
#if defined(__x86_64__)
  auto* out = static_cast<uint8_t*>(dst);
  const auto* in = static_cast<const uint8_t*>(src);
  constexpr std::size_t kBlock = sizeof(__m128i);
  // Plain stores up to dst's first 16-byte boundary and for the tail;
  // streaming stores for the whole blocks between, four at a time.
  const std::size_t misalignment = reinterpret_cast<uintptr_t>(out) % kBlock;
  std::size_t done = misalignment == 0 ? 0 : kBlock - misalignment;
  if (done > bytes) done = bytes;
  std::memcpy(out, in, done);
  for (; done + 4 * kBlock <= bytes; done += 4 * kBlock) {
    const auto* from = reinterpret_cast<const __m128i*>(in + done);
    auto* to = reinterpret_cast<__m128i*>(out + done);
    const __m128i a = _mm_loadu_si128(from);
    const __m128i b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2);
    const __m128i d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
  }
  for (; done + kBlock <= bytes; done += kBlock) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + done),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + done)));
  }
  std::memcpy(out + done, in + done, bytes - done);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace herd::ops
