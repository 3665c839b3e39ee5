// Helpers that every algorithm file of collectives/ shares: addressing raw
// buffers with 64-bit counts, laying out consecutive blocks, and waiting for
// transfers so that a failure names where it happened.
//
// Internal to collectives/ (namespace detail); called on the thread that runs
// the collective.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/chunking.h"
#include "collectives/transport.h"
#include "common/status.h"

namespace herd::collectives::detail {

// The byte at element `offset` of a buffer of elements of element_size bytes.
inline unsigned char* element_at(void* buf, int64_t offset, std::size_t element_size) {
  return static_cast<unsigned char*>(buf) + static_cast<std::size_t>(offset) * element_size;
}
inline const unsigned char* element_at(const void* buf, int64_t offset, std::size_t element_size) {
  return static_cast<const unsigned char*>(buf) + static_cast<std::size_t>(offset) * element_size;
}

inline std::size_t byte_size(int64_t count, std::size_t element_size) {
  return static_cast<std::size_t>(count) * element_size;
}

// a mod p in [0, p), for a possibly negative a.
inline int wrap(int a, int p) { return ((a % p) + p) % p; }

// Blocks of counts[0], counts[1], ... elements laid out back to back from
// offset 0, in order: block i starts at the sum of counts[0..i). Every count
// must be >= 0.
std::vector<Range> consecutive_ranges(const std::vector<int64_t>& counts);

// Where a transfer runs, for its error message: "ring allreduce
// reduce-scatter step 1 (rank 2, recv from 1): ...".
struct Where {
  const char* algorithm;
  const char* phase;
  int64_t step;  // a ring step, a tree round or a segment (chain, direct reduce-scatter)
  int rank;
};

// Waits for `transfer` with `peer`; a failure gets the algorithm, phase, step,
// rank, direction ("send to" or "recv from") and peer in front.
[[nodiscard]] Status finish(PendingTransfer& transfer, const Where& where, const char* direction,
                            int peer);

// Waits for every transfer of `transfers` with `peer`, in order, releasing
// each, and returns the first failure.
[[nodiscard]] Status finish_all(std::vector<std::unique_ptr<PendingTransfer>>& transfers,
                                const Where& where, const char* direction, int peer);

// Copies `bytes` bytes from src to dst; does nothing if they are the same
// address (a collective run in place), and allows any other overlap.
void copy_block(void* dst, const void* src, std::size_t bytes);

}  // namespace herd::collectives::detail
