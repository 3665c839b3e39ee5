// A copy whose destination bypasses the cache (non-temporal stores).
//
// Called by the shared-memory allreduce (collectives/shm) to copy large
// results out, on the thread running the collective; no state.
//
// Why: an ordinary store to a line that is not cached first reads the line
// from memory (read for ownership), so copying n bytes into a cold buffer
// moves 3n bytes over the memory bus; streaming stores write whole lines
// without reading them, 2n. Worth it only for a destination too large to
// stay in the cache and that no other core reads right after
// (docs/design/streaming-stores.md).
#pragma once

#include <cstddef>

namespace herd::ops {

// Copies `bytes` bytes from src to dst (which must not overlap) like memcpy,
// with non-temporal stores for the destination's whole 16-byte blocks on
// x86-64 and plain stores elsewhere. The stores are weakly ordered: call
// stream_fence() before another thread may read dst.
void stream_copy(void* dst, const void* src, std::size_t bytes);

// Orders this thread's earlier stream_copy stores before its later stores
// (sfence), so that a release that follows publishes them.
void stream_fence();

}  // namespace herd::ops
