// Chunk and segment arithmetic of the ring algorithms; see chunking.h.
//
// All counts and offsets are int64_t: a buffer of more than 2^31 elements
// must split exactly like a small one.
#include "collectives/chunking.h"

#include <algorithm>

#include "common/enforce.h"

namespace herd::collectives {

// `count` elements in `num_chunks` chunks: every chunk holds base = count /
// num_chunks elements, and the first remainder = count % num_chunks chunks one
// more. Chunk `index` therefore starts after index base-sized chunks plus one
// extra element for each of the min(index, remainder) larger chunks before it.
Range chunk_range(int64_t count, int num_chunks, int index) {
  HERD_ENFORCE_GE(count, 0);
  HERD_ENFORCE_GE(num_chunks, 1);
  HERD_ENFORCE_GE(index, 0);
  HERD_ENFORCE_LT(index, num_chunks);
  const int64_t base = count / num_chunks;
  const int64_t remainder = count % num_chunks;
  const int64_t chunk_index = index;
  Range chunk;
  chunk.offset = chunk_index * base + std::min(chunk_index, remainder);
  chunk.count = base + (chunk_index < remainder ? 1 : 0);
  return chunk;
}

// Segments are cut front to back, each max_segment_count elements long except
// the last, which holds what remains.
std::vector<Range> split_into_segments(Range chunk, int64_t max_segment_count) {
  HERD_ENFORCE_GE(max_segment_count, 1);
  HERD_ENFORCE_GE(chunk.count, 0);
  std::vector<Range> segments;
  const int64_t num_segments =
      chunk.count / max_segment_count + (chunk.count % max_segment_count != 0 ? 1 : 0);
  segments.reserve(static_cast<std::size_t>(num_segments));
  for (int64_t index = 0; index < num_segments; ++index) {
    const int64_t done = index * max_segment_count;
    Range segment;
    segment.offset = chunk.offset + done;
    segment.count = std::min(max_segment_count, chunk.count - done);
    segments.push_back(segment);
  }
  return segments;
}

}  // namespace herd::collectives
