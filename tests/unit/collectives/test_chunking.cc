// chunk_range and split_into_segments: the index arithmetic of the ring,
// checked for every edge (empty buffers, fewer elements than chunks, counts
// not divisible by the chunks, counts beyond 2^31).
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/chunking.h"

namespace herd::collectives {
namespace {

// Returns "" if chunks 0..num_chunks-1 of `count` are contiguous, in order,
// cover [0, count) and differ in size by at most one with the larger first;
// else the first broken chunk.
std::string check_chunks(int64_t count, int num_chunks) {
  const int64_t base = count / num_chunks;
  int64_t next_offset = 0;
  for (int index = 0; index < num_chunks; ++index) {
    const Range chunk = chunk_range(count, num_chunks, index);
    const int64_t expected_count = base + (index < count % num_chunks ? 1 : 0);
    if (chunk.offset != next_offset || chunk.count != expected_count) {
      return "chunk " + std::to_string(index) + " of " + std::to_string(num_chunks) +
             " for count " + std::to_string(count) + ": expected {" + std::to_string(next_offset) +
             ", " + std::to_string(expected_count) + "}, actual {" + std::to_string(chunk.offset) +
             ", " + std::to_string(chunk.count) + "}";
    }
    next_offset += chunk.count;
  }
  if (next_offset != count) {
    return "chunks cover " + std::to_string(next_offset) + " of " + std::to_string(count);
  }
  return "";
}

// Same for the segments of `chunk`.
std::string check_segments(Range chunk, int64_t max_segment_count) {
  const std::vector<Range> segments = split_into_segments(chunk, max_segment_count);
  int64_t next_offset = chunk.offset;
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const bool last = i + 1 == segments.size();
    const bool size_ok = last ? segments[i].count >= 1 && segments[i].count <= max_segment_count
                              : segments[i].count == max_segment_count;
    if (segments[i].offset != next_offset || !size_ok) {
      return "segment " + std::to_string(i) + ": offset " + std::to_string(segments[i].offset) +
             " (expected " + std::to_string(next_offset) + "), count " +
             std::to_string(segments[i].count);
    }
    next_offset += segments[i].count;
  }
  if (next_offset != chunk.offset + chunk.count) {
    return "segments end at " + std::to_string(next_offset) + ", chunk at " +
           std::to_string(chunk.offset + chunk.count);
  }
  return "";
}

TEST_CASE("chunk_range of an empty buffer gives empty chunks at offset 0", "[chunking]") {
  for (int num_chunks : {1, 2, 7}) {
    for (int index = 0; index < num_chunks; ++index) {
      CAPTURE(num_chunks, index);
      CHECK(chunk_range(0, num_chunks, index) == Range{0, 0});
    }
  }
}

TEST_CASE("chunk_range with fewer elements than chunks gives the first ones one each",
          "[chunking]") {
  CHECK(chunk_range(3, 5, 0) == Range{0, 1});
  CHECK(chunk_range(3, 5, 1) == Range{1, 1});
  CHECK(chunk_range(3, 5, 2) == Range{2, 1});
  CHECK(chunk_range(3, 5, 3) == Range{3, 0});
  CHECK(chunk_range(3, 5, 4) == Range{3, 0});
}

TEST_CASE("chunk_range puts the remainder in the first chunks", "[chunking]") {
  // 10 = 4 + 3 + 3
  CHECK(chunk_range(10, 3, 0) == Range{0, 4});
  CHECK(chunk_range(10, 3, 1) == Range{4, 3});
  CHECK(chunk_range(10, 3, 2) == Range{7, 3});
  // 12 = 3 * 4
  CHECK(chunk_range(12, 4, 3) == Range{9, 3});
  CHECK(chunk_range(5, 1, 0) == Range{0, 5});
}

TEST_CASE("chunk_range chunks are contiguous and cover the buffer", "[chunking]") {
  for (int num_chunks : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 1000}) {
    for (int64_t count : {0, 1, 2, 3, 7, 100, 1000, 10000, 65539}) {
      CAPTURE(num_chunks, count);
      CHECK(check_chunks(count, num_chunks) == "");
    }
  }
}

TEST_CASE("chunk_range handles counts beyond 2^31 with 64-bit offsets", "[chunking]") {
  const int64_t count = 3 * (int64_t{1} << 31) + 5;  // 6442450949
  // 6442450949 = 3 * 2147483649 + 2, so two chunks of 2147483650 come first.
  CHECK(chunk_range(count, 3, 0) == Range{0, 2147483650});
  CHECK(chunk_range(count, 3, 1) == Range{2147483650, 2147483650});
  CHECK(chunk_range(count, 3, 2) == Range{4294967300, 2147483649});
  for (int num_chunks : {1, 2, 3, 4, 7, 15, 64}) {
    CAPTURE(num_chunks);
    CHECK(check_chunks(count, num_chunks) == "");
  }
  const Range last = chunk_range(count, 2, 1);
  CHECK(last.offset + last.count == count);
}

TEST_CASE("split_into_segments of an empty chunk gives no segments", "[chunking]") {
  CHECK(split_into_segments(Range{0, 0}, 1).empty());
  CHECK(split_into_segments(Range{17, 0}, 1000).empty());
}

TEST_CASE("split_into_segments cuts full segments and a shorter last one", "[chunking]") {
  const std::vector<Range> segments = split_into_segments(Range{10, 7}, 3);
  REQUIRE(segments.size() == 3);
  CHECK(segments[0] == Range{10, 3});
  CHECK(segments[1] == Range{13, 3});
  CHECK(segments[2] == Range{16, 1});

  const std::vector<Range> whole = split_into_segments(Range{5, 4}, 100);
  REQUIRE(whole.size() == 1);
  CHECK(whole[0] == Range{5, 4});

  const std::vector<Range> exact = split_into_segments(Range{0, 6}, 2);
  REQUIRE(exact.size() == 3);
  CHECK(exact[2] == Range{4, 2});

  const std::vector<Range> single_elements = split_into_segments(Range{3, 4}, 1);
  REQUIRE(single_elements.size() == 4);
  CHECK(single_elements[3] == Range{6, 1});
}

TEST_CASE("split_into_segments segments are contiguous and cover the chunk", "[chunking]") {
  for (int64_t chunk_count : {1, 2, 3, 7, 100, 1000, 65539}) {
    for (int64_t max_segment_count : {1, 2, 3, 5, 64, 1000, 1 << 20}) {
      CAPTURE(chunk_count, max_segment_count);
      CHECK(check_segments(Range{12345, chunk_count}, max_segment_count) == "");
    }
  }
}

TEST_CASE("split_into_segments handles chunks beyond 2^31 elements", "[chunking]") {
  const int64_t count = 3 * (int64_t{1} << 31) + 5;
  const Range chunk = chunk_range(count, 2, 1);  // offset 3221225475, 3221225474 elements
  const int64_t max_segment_count = int64_t{1} << 30;
  const std::vector<Range> segments = split_into_segments(chunk, max_segment_count);
  REQUIRE(segments.size() == 4);
  CHECK(segments[0] == Range{chunk.offset, max_segment_count});
  CHECK(segments[3].offset == chunk.offset + 3 * max_segment_count);
  CHECK(segments[3].count == chunk.count - 3 * max_segment_count);
  CHECK(check_segments(chunk, max_segment_count) == "");
  CHECK(check_segments(chunk, (int64_t{1} << 31) + 1) == "");
}

}  // namespace
}  // namespace herd::collectives
