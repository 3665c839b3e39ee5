// Index arithmetic shared by the ring algorithms: how a buffer of `count`
// elements splits into one chunk per rank, and a chunk into segments.
//
// Pure functions with 64-bit counts, tested without any transport.
#pragma once

#include <cstdint>
#include <vector>

namespace herd::collectives {

struct Range {
  int64_t offset = 0;  // in elements
  int64_t count = 0;   // in elements
  bool operator==(const Range& other) const {
    return offset == other.offset && count == other.count;
  }
};

// Chunk `index` of `count` elements split into `num_chunks` nearly equal
// chunks: the first count % num_chunks chunks hold one element more. Chunks
// are contiguous, in order, and cover [0, count) exactly; some are empty when
// count < num_chunks.
Range chunk_range(int64_t count, int num_chunks, int index);

// Splits `chunk` into consecutive segments of at most max_segment_count
// elements (>= 1). An empty chunk gives no segments.
std::vector<Range> split_into_segments(Range chunk, int64_t max_segment_count);

}  // namespace herd::collectives
