// The .idx beside a .rec: written line for line as MXIndexedRecordIO writes
// it, read with any whitespace, random access by key, and each bad index named
// by file and line.
#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/record_index.h"
#include "herd/error.h"
#include "tests/unit/test_files.h"

namespace herd::data {
namespace {

using herd::testing::bytes_of;
using herd::testing::read_file;
using herd::testing::TempDir;
using herd::testing::write_file;

std::string text_of(const std::vector<uint8_t>& bytes) { return {bytes.begin(), bytes.end()}; }

// Payloads of `size` bytes with no magic word in them (no byte is 0xce).
std::vector<uint8_t> payload(std::mt19937& random, std::size_t size) {
  std::vector<uint8_t> bytes(size);
  for (auto& byte : bytes) byte = static_cast<uint8_t>(random() % 0xce);
  return bytes;
}

TEST_CASE("IndexedRecordWriter writes \"key\\toffset\\n\" per record, keys in any order",
          "[data][index]") {
  TempDir dir;
  const std::string idx = dir.file("data.idx");
  const std::string rec = dir.file("data.rec");
  std::mt19937 random(3);
  std::vector<int64_t> keys;
  for (int64_t i = 0; i < 100; ++i) keys.push_back((i * 37) % 100 + 1000);
  keys.push_back(-5);
  std::vector<std::vector<uint8_t>> payloads;
  std::string expected_idx;
  uint64_t offset = 0;
  {
    IndexedRecordWriter writer(idx, rec);
    for (const int64_t key : keys) {
      payloads.push_back(payload(random, random() % 50));
      // Each record is one part: 8 bytes of header and the payload padded to 4.
      CHECK(writer.write(key, payloads.back().data(), payloads.back().size()) == offset);
      expected_idx += std::to_string(key) + "\t" + std::to_string(offset) + "\n";
      offset += 8 + (payloads.back().size() + 3) / 4 * 4;
    }
    writer.close();
  }
  CHECK(text_of(read_file(idx)) == expected_idx);
  CHECK(read_file(rec).size() == offset);

  const std::vector<IndexEntry> entries = read_index(idx);
  REQUIRE(entries.size() == keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) CHECK(entries[i].key == keys[i]);

  const IndexedRecordReader reader(idx, rec);
  CHECK(reader.keys() == keys);
  CHECK(reader.file().path() == rec);
  CHECK(reader.contains(1000));
  CHECK_FALSE(reader.contains(1100));
  // read_idx of random keys, as MXNet's test does.
  std::vector<uint8_t> record;
  for (int draw = 0; draw < 300; ++draw) {
    const std::size_t i = random() % keys.size();
    reader.read(keys[i], &record);
    CHECK(record == payloads[i]);
    CHECK(reader.offset(keys[i]) == entries[i].offset);
  }
}

TEST_CASE("index_path_for: PATH.idx beside PATH.rec, else the path and .idx", "[data][index]") {
  CHECK(index_path_for("/data/train.rec") == "/data/train.idx");
  CHECK(index_path_for("train.rec") == "train.idx");
  CHECK(index_path_for("/data/train.bin") == "/data/train.bin.idx");
  CHECK(index_path_for(".rec") == ".rec.idx");
}

TEST_CASE("read_index takes any whitespace, blank lines and signed keys", "[data][index]") {
  TempDir dir;
  const std::string idx = dir.file("spaces.idx");
  write_file(idx, std::string("0\t0\n  7   16  \r\n\n-3\t\t24\n+9 40\n\t\n9223372036854775807 "
                              "18446744073709551615\n-9223372036854775808 4"));
  const std::vector<IndexEntry> entries = read_index(idx);
  REQUIRE(entries.size() == 6);
  const std::vector<int64_t> keys = {0, 7, -3, 9, INT64_MAX, INT64_MIN};
  const std::vector<uint64_t> offsets = {0, 16, 24, 40, UINT64_MAX, 4};
  for (std::size_t i = 0; i < entries.size(); ++i) {
    CHECK(entries[i].key == keys[i]);
    CHECK(entries[i].offset == offsets[i]);
  }
  write_file(idx, std::string());
  CHECK(read_index(idx).empty());
}

TEST_CASE("A bad .idx line is named by file and line", "[data][index]") {
  TempDir dir;
  const std::string idx = dir.file("bad.idx");
  const std::string where = "RecordIO index '" + idx + "' line ";
  auto error_for = [&](const std::string& text) {
    write_file(idx, text);
    try {
      read_index(idx);
    } catch (const Error& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  CHECK(error_for("0\t0\n12\n") ==
        where + "2: expected two fields, a key and a byte offset, found 1 in \"12\"");
  CHECK(error_for("0\t0\n\n1 2 3\n") ==
        where + "3: expected two fields, a key and a byte offset, found 3 in \"1 2 3\"");
  CHECK(error_for("a\t4\n") == where + "1: the key \"a\" is not a 64-bit signed integer");
  CHECK(error_for("9223372036854775808\t4\n") ==
        where + "1: the key \"9223372036854775808\" is not a 64-bit signed integer");
  CHECK(error_for("-\t4\n") == where + "1: the key \"-\" is not a 64-bit signed integer");
  CHECK(error_for("1\t-4\n") ==
        where + "1: the offset \"-4\" is not a byte offset (an unsigned integer)");
  CHECK(error_for("1\t4x\n") ==
        where + "1: the offset \"4x\" is not a byte offset (an unsigned integer)");
  CHECK(error_for("1\t18446744073709551616\n") ==
        where +
            "1: the offset \"18446744073709551616\" is not a byte offset (an unsigned integer)");
  CHECK(error_for("4\t0\n5\t12\n4\t24\n") ==
        where + "3: the key 4 is given twice (first on line 1)");
  const std::string missing = dir.file("missing.idx");
  CHECK_THROWS_WITH(read_index(missing),
                    "RecordIO index '" + missing + "' cannot be opened: No such file or directory");
}

TEST_CASE("IndexedRecordReader names offsets past the end and offsets that are no head",
          "[data][index]") {
  TempDir dir;
  const std::string idx = dir.file("data.idx");
  const std::string rec = dir.file("data.rec");
  {
    IndexedRecordWriter writer(idx, rec);
    writer.write(1, "abcdefgh", 8);  // bytes 0..15
    writer.write(2, "xyz", 3);       // bytes 16..27
    writer.close();
  }
  SECTION("an offset at or past the .rec's end") {
    write_file(idx, std::string("1\t0\n2\t28\n"));
    CHECK_THROWS_WITH(IndexedRecordReader(idx, rec),
                      "RecordIO index '" + idx +
                          "' line 2: the offset 28 of key 2 lies past the "
                          "end of '" +
                          rec + "' (28 bytes)");
  }
  SECTION("an offset that is no record head") {
    write_file(idx, std::string("1\t0\n2\t8\n3\t6\n"));
    const IndexedRecordReader reader(idx, rec);
    std::vector<uint8_t> record;
    CHECK_THROWS_WITH(reader.read(2, &record),
                      "key 2 of RecordIO index '" + idx + "': RecordIO file '" + rec +
                          "' at byte 8: not a record head: expected the magic word 0xced7230a, "
                          "found 0x64636261");
    CHECK_THROWS_WITH(reader.read(3, &record),
                      Catch::Contains("at byte 6: not a record head: record heads lie at "
                                      "multiples of 4 bytes"));
    reader.read(1, &record);
    CHECK(record == bytes_of("abcdefgh"));
  }
  SECTION("a key the .idx lacks") {
    const IndexedRecordReader reader(idx, rec);
    std::vector<uint8_t> record;
    CHECK_THROWS_WITH(reader.read(3, &record), "RecordIO index '" + idx + "' has no key 3");
    CHECK_THROWS_WITH(reader.offset(-1), "RecordIO index '" + idx + "' has no key -1");
  }
  SECTION("a key given twice") {
    write_file(idx, std::string("1\t0\n1\t16\n"));
    CHECK_THROWS_WITH(IndexedRecordReader(idx, rec),
                      "RecordIO index '" + idx +
                          "' line 2: the key 1 is given twice (first on "
                          "line 1)");
  }
}

TEST_CASE("IndexedRecordWriter refuses a key twice and writes after close", "[data][index]") {
  TempDir dir;
  const std::string idx = dir.file("data.idx");
  const std::string rec = dir.file("data.rec");
  IndexedRecordWriter writer(idx, rec);
  writer.write(7, "a", 1);
  CHECK_THROWS_WITH(writer.write(7, "b", 1),
                    "RecordIO index '" + idx + "': the key 7 is already written");
  writer.close();
  CHECK_THROWS_WITH(writer.write(8, "c", 1),
                    "RecordIO index '" + idx + "': written to after close()");
  // The refused record left no trace in either file.
  CHECK(text_of(read_file(idx)) == "7\t0\n");
  CHECK(read_file(rec).size() == 12);
  const std::string nowhere = dir.file("no/such.idx");
  CHECK_THROWS_WITH(
      IndexedRecordWriter(nowhere, dir.file("other.rec")),
      "RecordIO index '" + nowhere + "' cannot be created: No such file or directory");
}

}  // namespace
}  // namespace herd::data
