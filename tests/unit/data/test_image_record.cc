// The image-record payload against MXNet's struct 'IfQQ': bytes laid out by
// hand, MXNet's multi-label test (label counts 1-254, payloads 0-254 bytes,
// float32 exact), and records too short for what their header says.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/image_record.h"
#include "herd/data/recordio.h"
#include "herd/error.h"
#include "tests/unit/test_files.h"

namespace herd::data {
namespace {

using herd::testing::TempDir;

std::vector<uint8_t> le(uint64_t value, int width) {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < width; ++i) bytes.push_back(static_cast<uint8_t>(value >> (8 * i)));
  return bytes;
}

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> pieces) {
  std::vector<uint8_t> all;
  for (const auto& piece : pieces) all.insert(all.end(), piece.begin(), piece.end());
  return all;
}

uint32_t bits(float value) {
  uint32_t word = 0;
  std::memcpy(&word, &value, 4);
  return word;
}

TEST_CASE("pack_image_record lays out struct 'IfQQ' and the labels little-endian",
          "[data][image_record]") {
  SECTION("one label: flag 0, the label in the header") {
    ImageRecordHeader header;
    header.flag = 5;  // overridden: no label list means flag 0
    header.label = 3.5f;
    header.id = 7;
    header.id2 = 0x0102030405060708;
    const auto record = pack_image_record(header, {}, "xy", 2);
    // 3.5f is 0x40600000.
    CHECK(record == concat({le(0, 4),
                            {0x00, 0x00, 0x60, 0x40},
                            le(7, 8),
                            {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01},
                            {'x', 'y'}}));
    const ImageRecord unpacked = unpack_image_record(record.data(), record.size(), "r");
    CHECK(unpacked.header.flag == 0);
    CHECK(unpacked.header.label == 3.5f);
    CHECK(unpacked.header.id == 7);
    CHECK(unpacked.header.id2 == 0x0102030405060708);
    CHECK(unpacked.labels == std::vector<float>{3.5f});
    CHECK(std::string(reinterpret_cast<const char*>(unpacked.payload), unpacked.payload_size) ==
          "xy");
  }
  SECTION("a label list: flag = its length, label 0, the labels before the payload") {
    ImageRecordHeader header;
    header.label = 9.0f;  // written as 0
    header.id = 1;
    const auto record = pack_image_record(header, {1.0f, -2.5f}, "z", 1);
    // 1.0f is 0x3f800000, -2.5f is 0xc0200000.
    CHECK(record == concat({le(2, 4),
                            le(0, 4),
                            le(1, 8),
                            le(0, 8),
                            {0x00, 0x00, 0x80, 0x3f},
                            {0x00, 0x00, 0x20, 0xc0},
                            {'z'}}));
    const ImageRecord unpacked = unpack_image_record(record.data(), record.size(), "r");
    CHECK(unpacked.header.flag == 2);
    CHECK(unpacked.header.label == 0.0f);
    CHECK(unpacked.labels == std::vector<float>{1.0f, -2.5f});
    CHECK(unpacked.payload_size == 1);
    CHECK(unpacked.payload == record.data() + 32);
  }
}

TEST_CASE("Multi-label records: label counts 1-254 and payloads of 0-254 bytes, float32 exact",
          "[data][image_record]") {
  std::mt19937 random(254);
  for (uint32_t count = 1; count < 255; ++count) {
    for (std::size_t size = 0; size < 255; ++size) {
      std::vector<float> labels(count);
      for (float& label : labels) {
        // Any bit pattern but NaNs, which compare unequal to themselves.
        uint32_t word = static_cast<uint32_t>(random());
        if ((word & 0x7f800000) == 0x7f800000) word &= 0xff7fffff;
        std::memcpy(&label, &word, 4);
      }
      std::string payload(size, '\0');
      for (char& c : payload) c = static_cast<char>('A' + random() % 26);
      ImageRecordHeader header;
      header.id = size;
      const auto record = pack_image_record(header, labels, payload.data(), payload.size());
      REQUIRE(record.size() == 24 + 4 * count + size);
      const ImageRecord unpacked = unpack_image_record(record.data(), record.size(), "r");
      REQUIRE(unpacked.header.flag == count);
      REQUIRE(unpacked.header.id == size);
      REQUIRE(unpacked.labels.size() == count);
      // Bit for bit, and laid out little-endian after the header.
      std::vector<uint8_t> expected_bytes;
      for (const float label : labels) {
        const auto word = le(bits(label), 4);
        expected_bytes.insert(expected_bytes.end(), word.begin(), word.end());
      }
      REQUIRE(std::equal(expected_bytes.begin(), expected_bytes.end(), record.begin() + 24));
      REQUIRE(std::memcmp(unpacked.labels.data(), labels.data(), 4 * count) == 0);
      REQUIRE(std::string(reinterpret_cast<const char*>(unpacked.payload), unpacked.payload_size) ==
              payload);
    }
  }
}

TEST_CASE("Image records round-trip through a .rec file", "[data][image_record]") {
  TempDir dir;
  const std::string path = dir.file("images.rec");
  std::vector<std::vector<uint8_t>> written;
  {
    RecordWriter writer(path);
    for (uint64_t id = 0; id < 20; ++id) {
      ImageRecordHeader header;
      header.label = static_cast<float>(id % 10);
      header.id = id;
      const std::vector<float> labels =
          id % 2 == 0 ? std::vector<float>{} : std::vector<float>(id, 0.25f);
      // Pixels holding the magic word at an aligned offset of the record.
      const std::vector<uint8_t> pixels = {0x0a, 0x23, 0xd7, 0xce, static_cast<uint8_t>(id)};
      written.push_back(pack_image_record(header, labels, pixels.data(), pixels.size()));
      writer.write(written.back());
    }
    writer.close();
  }
  RecordReader reader(path);
  std::vector<uint8_t> record;
  for (uint64_t id = 0; id < 20; ++id) {
    REQUIRE(reader.next(&record));
    CHECK(record == written[id]);
    const ImageRecord unpacked = unpack_image_record(record.data(), record.size(), "r");
    CHECK(unpacked.header.id == id);
    CHECK(unpacked.labels.size() == (id % 2 == 0 ? 1 : id));
    CHECK(unpacked.payload_size == 5);
    CHECK(unpacked.payload[4] == id);
  }
  CHECK_FALSE(reader.next(&record));
}

TEST_CASE("Records too short for their image-record header are named", "[data][image_record]") {
  const std::string where = "train.rec: record at byte 1234";
  std::vector<uint8_t> record(24, 0);
  for (std::size_t size = 0; size < 24; ++size) {
    CHECK_THROWS_WITH(unpack_image_record(record.data(), size, where),
                      where + ": the record is " + std::to_string(size) +
                          " bytes, shorter than the 24-byte image-record header");
  }
  // flag 3 needs 12 bytes of labels; 8 follow.
  record = concat({le(3, 4), le(0, 4), le(0, 8), le(0, 8), le(0, 8)});
  CHECK_THROWS_WITH(unpack_image_record(record.data(), record.size(), where),
                    where +
                        ": the image-record header's flag counts 3 float32 labels (12 bytes), "
                        "but only 8 bytes follow the header");
  record = concat({le(0xffffffff, 4), le(0, 4), le(0, 8), le(0, 8)});
  CHECK_THROWS_WITH(unpack_image_record(record.data(), record.size(), where),
                    where +
                        ": the image-record header's flag counts 4294967295 float32 labels "
                        "(17179869180 bytes), but only 0 bytes follow the header");
  // Exactly enough: 2 labels, no payload.
  record = concat({le(2, 4), le(0, 4), le(0, 8), le(0, 8), le(bits(1.5f), 4), le(bits(-1.f), 4)});
  const ImageRecord unpacked = unpack_image_record(record.data(), record.size(), where);
  CHECK(unpacked.labels == std::vector<float>{1.5f, -1.0f});
  CHECK(unpacked.payload_size == 0);
}

}  // namespace
}  // namespace herd::data
