// ops::stream_copy against memcpy: every destination alignment within a
// 16-byte block and lengths around the block and four-block boundaries,
// with the bytes around the destination left untouched.
#include <cstdint>
#include <cstring>
#include <vector>

#include <catch2/catch.hpp>

#include "ops/stream_copy.h"

namespace herd::ops {
namespace {

TEST_CASE("stream_copy copies like memcpy at every alignment and length", "[ops][stream_copy]") {
  std::vector<uint8_t> source(4096);
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<uint8_t>(i * 31 + 7);
  for (std::size_t dst_offset = 0; dst_offset < 16; ++dst_offset) {
    for (std::size_t src_offset : {0, 1, 8}) {
      for (std::size_t bytes : {0, 1, 15, 16, 17, 63, 64, 65, 100, 1000, 4000}) {
        std::vector<uint8_t> destination(4200, 0xAB);
        stream_copy(destination.data() + dst_offset, source.data() + src_offset, bytes);
        stream_fence();
        INFO("dst offset " << dst_offset << " src offset " << src_offset << " bytes " << bytes);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < destination.size(); ++i) {
          const bool inside = i >= dst_offset && i < dst_offset + bytes;
          const uint8_t want = inside ? source[src_offset + i - dst_offset] : 0xAB;
          if (destination[i] != want && mismatches++ == 0) {
            UNSCOPED_INFO("first: index " << i << ": expected " << +want << ", actual "
                                          << +destination[i]);
          }
        }
        CHECK(mismatches == 0);
      }
    }
  }
}

}  // namespace
}  // namespace herd::ops
