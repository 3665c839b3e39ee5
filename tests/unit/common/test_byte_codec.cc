// common/byte_codec.h: the exact little-endian bytes each write produces, the
// values each read gives back, and reads past the end that fail once, with
// the byte they failed at, and read nothing more.
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "common/byte_codec.h"

namespace herd::detail {
namespace {

TEST_CASE("byte codec: every write is little-endian", "[byte_codec]") {
  ByteWriter out;
  out.u8(0xab);
  out.u32(0x01020304u);
  out.i32(-2);
  out.u64(0x0102030405060708ull);
  out.i64(-1);
  out.f64(1.5);                          // 0x3ff8000000000000
  const float floats[] = {1.0f, -2.0f};  // 0x3f800000, 0xc0000000
  out.f32s(floats, 2);
  out.string("hi");
  out.bytes("xyz", 3);
  const std::vector<uint8_t> expected = {
      0xab,                                            // u8
      0x04, 0x03, 0x02, 0x01,                          // u32
      0xfe, 0xff, 0xff, 0xff,                          // i32 -2
      0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // u64
      0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // i64 -1
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf8, 0x3f,  // f64 1.5
      0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0,  // f32 1.0, -2.0
      0x02, 0x00, 0x00, 0x00, 'h',  'i',               // string
      'x',  'y',  'z',                                 // bytes
  };
  CHECK(out.size() == expected.size());
  CHECK(out.take() == expected);
}

TEST_CASE("byte codec: patches overwrite bytes already written", "[byte_codec]") {
  ByteWriter out;
  out.u32(0);
  out.u64(0);
  out.u8(9);
  out.patch_u32(0, 0xdeadbeefu);
  out.patch_u64(4, 13);
  CHECK(out.take() == std::vector<uint8_t>{0xef, 0xbe, 0xad, 0xde, 13, 0, 0, 0, 0, 0, 0, 0, 9});
  ByteWriter small;
  small.u32(0);
  CHECK_THROWS(small.patch_u64(0, 1));  // past the end: a bug in the caller
}

TEST_CASE("byte codec: reads give back what was written", "[byte_codec]") {
  ByteWriter out;
  out.u8(200);
  out.u32(std::numeric_limits<uint32_t>::max());
  out.i32(std::numeric_limits<int32_t>::min());
  out.u64(std::numeric_limits<uint64_t>::max());
  out.i64(std::numeric_limits<int64_t>::min());
  out.f64(-0.0);
  const float floats[] = {0.5f, -0.25f, 3.0f};
  out.f32s(floats, 3);
  out.string(std::string("a\0b", 3));
  out.string("");
  out.bytes("\x01\x02", 2);
  out.bytes("\x03\x04", 2);
  const std::vector<uint8_t> bytes = out.take();

  ByteReader in(bytes.data(), bytes.size(), "test bytes");
  CHECK(in.u8() == 200);
  CHECK(in.u32() == std::numeric_limits<uint32_t>::max());
  CHECK(in.i32() == std::numeric_limits<int32_t>::min());
  CHECK(in.u64() == std::numeric_limits<uint64_t>::max());
  CHECK(in.i64() == std::numeric_limits<int64_t>::min());
  const double zero = in.f64();
  CHECK(zero == 0.0);
  CHECK(std::signbit(zero));
  CHECK(in.f32s(3) == std::vector<float>{0.5f, -0.25f, 3.0f});
  CHECK(in.string() == std::string("a\0b", 3));
  CHECK(in.string().empty());
  uint8_t two[2] = {0, 0};
  in.bytes(two, 2);
  CHECK(two[0] == 1);
  CHECK(two[1] == 2);
  CHECK(in.position() == bytes.size() - 2);
  const uint8_t* range = in.range(2);
  REQUIRE(range == bytes.data() + bytes.size() - 2);
  CHECK(range[1] == 4);
  CHECK(in.remaining() == 0);
  CHECK(in.ok());
}

TEST_CASE("byte codec: a read past the end fails once and reads nothing more", "[byte_codec]") {
  const std::vector<uint8_t> bytes = {1, 2, 3, 4, 5, 6};
  ByteReader in(bytes.data(), bytes.size(), "RequestList");
  CHECK(in.u32() == 0x04030201u);
  CHECK(in.u32() == 0);  // 2 bytes left
  CHECK_FALSE(in.ok());
  CHECK(in.status().message() == "truncated RequestList at byte 4: 4 bytes needed, 2 left");
  // Nothing more is read, and the first failure is the one kept.
  CHECK(in.u8() == 0);
  CHECK(in.position() == 4);
  in.fail("another failure");
  CHECK(in.status().message() == "truncated RequestList at byte 4: 4 bytes needed, 2 left");
  CHECK(in.range(1) == nullptr);
  CHECK(in.f32s(0).empty());
  CHECK(in.string().empty());
}

TEST_CASE("byte codec: lengths and counts are checked against the bytes left", "[byte_codec]") {
  // A string announcing 10 bytes with 2 left.
  const std::vector<uint8_t> text = {10, 0, 0, 0, 'a', 'b'};
  ByteReader strings(text.data(), text.size(), "name");
  CHECK(strings.string().empty());
  CHECK(strings.status().message() == "truncated name at byte 4: 10 bytes needed, 2 left");

  // 3 floats announced, 8 bytes left.
  const std::vector<uint8_t> floats(8, 0);
  ByteReader values(floats.data(), floats.size(), "section PARM");
  CHECK(values.f32s(3).empty());
  CHECK(values.status().message() ==
        "truncated section PARM at byte 0: 3 floats of 4 bytes, 8 bytes left");
  CHECK(values.position() == 0);

  ByteReader empty(nullptr, 0, "empty");
  CHECK(empty.need(0));
  CHECK_FALSE(empty.need(1));
  CHECK(empty.status().message() == "truncated empty at byte 0: 1 bytes needed, 0 left");

  ByteReader checked(floats.data(), floats.size(), "checked");
  checked.fail("corrupt checked at byte 0: kind byte 0");
  CHECK(checked.u8() == 0);
  CHECK(checked.status().message() == "corrupt checked at byte 0: kind byte 0");
}

}  // namespace
}  // namespace herd::detail
