// RecordIO's framing against dmlc-core's bytes: the golden file written by
// dmlc-core's own writer, the escaping of aligned magic words, and every kind
// of broken file the readers must name (file and byte offset).
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/recordio.h"
#include "herd/error.h"
#include "tests/unit/test_files.h"

namespace herd::data {
namespace {

using herd::testing::bytes_of;
using herd::testing::read_file;
using herd::testing::TempDir;
using herd::testing::write_file;

const std::vector<uint8_t> kMagic = {0x0a, 0x23, 0xd7, 0xce};

std::vector<uint8_t> concat(std::initializer_list<std::vector<uint8_t>> pieces) {
  std::vector<uint8_t> all;
  for (const auto& piece : pieces) all.insert(all.end(), piece.begin(), piece.end());
  return all;
}

// The four records of the golden file, as dmlc-core's RecordIOWriter wrote
// them: "ab"+M+"cd" (unaligned magic), M+"wxyz"+M+"q", "" and "abcd"+M.
std::vector<std::vector<uint8_t>> golden_records() {
  return {concat({bytes_of("ab"), kMagic, bytes_of("cd")}),
          concat({kMagic, bytes_of("wxyz"), kMagic, bytes_of("q")}),
          {},
          concat({bytes_of("abcd"), kMagic})};
}

// The 76 bytes, word by word as the reference lists them.
const std::vector<uint8_t> kGoldenFile = {
    0x0a, 0x23, 0xd7, 0xce, 0x08, 0x00, 0x00, 0x00, 0x61, 0x62, 0x0a, 0x23, 0xd7, 0xce, 0x63,
    0x64,                                                                    //
    0x0a, 0x23, 0xd7, 0xce, 0x00, 0x00, 0x00, 0x20,                          //
    0x0a, 0x23, 0xd7, 0xce, 0x04, 0x00, 0x00, 0x40, 0x77, 0x78, 0x79, 0x7a,  //
    0x0a, 0x23, 0xd7, 0xce, 0x01, 0x00, 0x00, 0x60, 0x71, 0x00, 0x00, 0x00,  //
    0x0a, 0x23, 0xd7, 0xce, 0x00, 0x00, 0x00, 0x00,                          //
    0x0a, 0x23, 0xd7, 0xce, 0x04, 0x00, 0x00, 0x20, 0x61, 0x62, 0x63, 0x64,  //
    0x0a, 0x23, 0xd7, 0xce, 0x00, 0x00, 0x00, 0x60};
const std::vector<uint64_t> kGoldenOffsets = {0, 16, 48, 56};

// A plain decoding of a file's parts, independent of the library: (cflag,
// data) per part. Requires well-formed framing.
struct Part {
  uint32_t cflag;
  std::vector<uint8_t> data;
};
std::vector<Part> parts_of(const std::vector<uint8_t>& file) {
  std::vector<Part> parts;
  std::size_t at = 0;
  while (at < file.size()) {
    REQUIRE(file.size() - at >= 8);
    REQUIRE(std::equal(kMagic.begin(), kMagic.end(), file.begin() + at));
    const uint32_t lrec = uint32_t{file[at + 4]} | uint32_t{file[at + 5]} << 8 |
                          uint32_t{file[at + 6]} << 16 | uint32_t{file[at + 7]} << 24;
    const std::size_t length = lrec & ((1u << 29) - 1);
    REQUIRE(at + 8 + length <= file.size());
    parts.push_back(
        {lrec >> 29, std::vector<uint8_t>(file.begin() + at + 8, file.begin() + at + 8 + length)});
    at += 8 + (length + 3) / 4 * 4;
  }
  REQUIRE(at == file.size());
  return parts;
}

std::vector<uint8_t> random_bytes(std::mt19937& random, std::size_t size) {
  std::vector<uint8_t> bytes(size);
  // 0xce never occurs, so no magic word appears by chance.
  for (auto& byte : bytes) byte = static_cast<uint8_t>(random() % 0xce);
  return bytes;
}

std::vector<std::vector<uint8_t>> read_all(const std::string& path) {
  RecordReader reader(path);
  std::vector<std::vector<uint8_t>> records;
  std::vector<uint8_t> record;
  while (reader.next(&record)) records.push_back(record);
  return records;
}

void write_records(const std::string& path, const std::vector<std::vector<uint8_t>>& records) {
  RecordWriter writer(path);
  for (const auto& record : records) writer.write(record);
  writer.close();
}

TEST_CASE("RecordWriter writes dmlc-core's golden file byte for byte", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("golden.rec");
  RecordWriter writer(path);
  std::vector<uint64_t> offsets;
  for (const auto& record : golden_records()) offsets.push_back(writer.write(record));
  CHECK(writer.tell() == 76);
  CHECK(writer.escaped_magic_count() == 3);
  CHECK(writer.path() == path);
  writer.close();
  CHECK(offsets == kGoldenOffsets);
  CHECK(read_file(path) == kGoldenFile);
}

TEST_CASE("append_record frames into a buffer and counts the escaped magic words",
          "[data][recordio]") {
  std::vector<uint8_t> out;
  std::vector<uint64_t> escaped;
  for (const auto& record : golden_records()) {
    escaped.push_back(append_record(&out, record.data(), record.size()));
  }
  CHECK(out == kGoldenFile);
  CHECK(escaped == std::vector<uint64_t>{0, 2, 0, 1});
}

TEST_CASE("The golden file reads back with every reader", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("golden.rec");
  write_file(path, kGoldenFile);
  CHECK(read_all(path) == golden_records());

  const RecordFile file(path);
  CHECK(file.size() == 76);
  std::vector<uint8_t> record;
  for (std::size_t i = 0; i < 4; ++i) {
    const uint64_t next = file.read_at(kGoldenOffsets[i], &record);
    CHECK(record == golden_records()[i]);
    CHECK(next == (i + 1 < 4 ? kGoldenOffsets[i + 1] : 76));
  }
  for (const uint64_t head : kGoldenOffsets) CHECK(file.is_record_head(head));
  // Middle and last parts, unaligned offsets, data and the end are no heads.
  for (const uint64_t other : {24, 36, 64, 2, 4, 8, 10, 76, 80, 1000}) {
    CAPTURE(other);
    CHECK_FALSE(file.is_record_head(other));
  }
  CHECK(file.seek_record_head(0) == 0);
  CHECK(file.seek_record_head(1) == 16);  // past the unaligned magic at byte 10
  CHECK(file.seek_record_head(16) == 16);
  CHECK(file.seek_record_head(17) == 48);  // past the middle and last parts
  CHECK(file.seek_record_head(49) == 56);
  CHECK(file.seek_record_head(57) == 76);  // the last part is no head
  CHECK(file.seek_record_head(76) == 76);
  CHECK(file.seek_record_head(500) == 76);
}

TEST_CASE("Records of 0 to 9 bytes round-trip, padded to 4", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("lengths.rec");
  std::mt19937 random(7);
  std::vector<std::vector<uint8_t>> records;
  std::size_t expected_size = 0;
  for (std::size_t length = 0; length <= 9; ++length) {
    records.push_back(random_bytes(random, length));
    expected_size += 8 + (length + 3) / 4 * 4;
  }
  write_records(path, records);
  const std::vector<uint8_t> file = read_file(path);
  CHECK(file.size() == expected_size);
  const std::vector<Part> parts = parts_of(file);
  REQUIRE(parts.size() == records.size());
  for (std::size_t i = 0; i < parts.size(); ++i) {
    CHECK(parts[i].cflag == 0);
    CHECK(parts[i].data == records[i]);
  }
  CHECK(read_all(path) == records);
}

TEST_CASE("A magic word at an aligned offset splits the record into parts 1, 2, 3",
          "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("aligned.rec");
  SECTION("the payload is one magic word: two empty parts") {
    write_records(path, {kMagic});
    CHECK(read_file(path) == concat({kMagic, {0, 0, 0, 0x20}, kMagic, {0, 0, 0, 0x60}}));
    CHECK(read_all(path) == std::vector<std::vector<uint8_t>>{kMagic});
  }
  SECTION("two magic words: first, middle and last part, all empty") {
    const auto record = concat({kMagic, kMagic});
    write_records(path, {record});
    CHECK(read_file(path) ==
          concat({kMagic, {0, 0, 0, 0x20}, kMagic, {0, 0, 0, 0x40}, kMagic, {0, 0, 0, 0x60}}));
    CHECK(read_all(path) == std::vector<std::vector<uint8_t>>{record});
  }
  SECTION("magic words at every aligned offset of random payloads") {
    std::mt19937 random(11);
    std::vector<std::vector<uint8_t>> records;
    std::vector<std::vector<std::vector<uint8_t>>> expected_pieces;
    for (std::size_t length = 4; length <= 40; ++length) {
      for (std::size_t at = 0; at + 4 <= length; at += 4) {
        std::vector<uint8_t> record = random_bytes(random, length);
        std::copy(kMagic.begin(), kMagic.end(), record.begin() + static_cast<std::ptrdiff_t>(at));
        records.push_back(record);
        expected_pieces.push_back(
            {std::vector<uint8_t>(record.begin(), record.begin() + static_cast<std::ptrdiff_t>(at)),
             std::vector<uint8_t>(record.begin() + static_cast<std::ptrdiff_t>(at + 4),
                                  record.end())});
      }
    }
    write_records(path, records);
    const std::vector<Part> parts = parts_of(read_file(path));
    REQUIRE(parts.size() == 2 * records.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      CAPTURE(i);
      CHECK(parts[2 * i].cflag == 1);
      CHECK(parts[2 * i].data == expected_pieces[i][0]);
      CHECK(parts[2 * i + 1].cflag == 3);
      CHECK(parts[2 * i + 1].data == expected_pieces[i][1]);
    }
    CHECK(read_all(path) == records);
  }
  SECTION("three magic words: parts 1, 2, 2, 3") {
    const auto record =
        concat({bytes_of("head"), kMagic, kMagic, bytes_of("mid!"), kMagic, bytes_of("tail")});
    RecordWriter writer(path);
    writer.write(record);
    CHECK(writer.escaped_magic_count() == 3);
    writer.close();
    const std::vector<Part> parts = parts_of(read_file(path));
    REQUIRE(parts.size() == 4);
    CHECK(parts[0].cflag == 1);
    CHECK(parts[0].data == bytes_of("head"));
    CHECK(parts[1].cflag == 2);
    CHECK(parts[1].data.empty());
    CHECK(parts[2].cflag == 2);
    CHECK(parts[2].data == bytes_of("mid!"));
    CHECK(parts[3].cflag == 3);
    CHECK(parts[3].data == bytes_of("tail"));
    CHECK(read_all(path) == std::vector<std::vector<uint8_t>>{record});
  }
}

TEST_CASE("A magic word at an unaligned offset is left as it is", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("unaligned.rec");
  std::mt19937 random(13);
  std::vector<std::vector<uint8_t>> records;
  for (std::size_t at : {1, 2, 3, 5, 6, 7, 9, 13}) {
    std::vector<uint8_t> record = random_bytes(random, at + 4 + at % 3);
    std::copy(kMagic.begin(), kMagic.end(), record.begin() + static_cast<std::ptrdiff_t>(at));
    records.push_back(record);
  }
  RecordWriter writer(path);
  for (const auto& record : records) writer.write(record);
  CHECK(writer.escaped_magic_count() == 0);
  writer.close();
  const std::vector<Part> parts = parts_of(read_file(path));
  REQUIRE(parts.size() == records.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(parts[i].cflag == 0);
    CHECK(parts[i].data == records[i]);
  }
  CHECK(read_all(path) == records);
}

TEST_CASE("255 one-byte records round-trip", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("bytes.rec");
  std::vector<std::vector<uint8_t>> records;
  for (int i = 0; i < 255; ++i) records.push_back({static_cast<uint8_t>(i)});
  RecordWriter writer(path);
  for (int i = 0; i < 255; ++i) {
    CHECK(writer.tell() == 12u * static_cast<uint64_t>(i));
    CHECK(writer.write(records[static_cast<std::size_t>(i)]) == 12u * static_cast<uint64_t>(i));
  }
  writer.close();
  CHECK(read_file(path).size() == 255 * 12);
  RecordReader reader(path);
  std::vector<uint8_t> record;
  for (int i = 0; i < 255; ++i) {
    CHECK(reader.tell() == 12u * static_cast<uint64_t>(i));
    REQUIRE(reader.next(&record));
    CHECK(record == records[static_cast<std::size_t>(i)]);
  }
  CHECK_FALSE(reader.next(&record));
  CHECK(record == records.back());  // untouched at the end
  CHECK(reader.tell() == 255 * 12);
  reader.seek(12 * 200);
  REQUIRE(reader.next(&record));
  CHECK(record == std::vector<uint8_t>{200});
  reader.reset();
  CHECK(read_all(path) == records);
}

TEST_CASE("Records longer than the reader's buffer and across its edges", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("large.rec");
  std::mt19937 random(17);
  std::vector<std::vector<uint8_t>> records;
  for (std::size_t size : {std::size_t{1} << 20, std::size_t{3} << 20}) {
    std::vector<uint8_t> record = random_bytes(random, size);
    // Escaped words at both ends and in the middle, so that parts start and
    // end all over the buffer.
    for (std::size_t at : {std::size_t{0}, size / 2, size / 2 + 4, size - 4}) {
      std::copy(kMagic.begin(), kMagic.end(), record.begin() + static_cast<std::ptrdiff_t>(at));
    }
    records.push_back(record);
  }
  for (int i = 0; i < 400; ++i) records.push_back(random_bytes(random, random() % 9000));
  records.push_back(random_bytes(random, (std::size_t{1} << 18) + 3));
  write_records(path, records);
  CHECK(read_all(path) == records);
  const RecordFile file(path);
  RecordReader reader(path);
  std::vector<uint8_t> from_reader;
  std::vector<uint8_t> from_file;
  uint64_t offset = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    CHECK(reader.tell() == offset);
    REQUIRE(reader.next(&from_reader));
    offset = file.read_at(offset, &from_file);
    CHECK(from_file == records[i]);
    CHECK(from_reader == records[i]);
  }
  CHECK(offset == file.size());
}

TEST_CASE("read_at's expected span changes how it reads, never what", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("spans.rec");
  std::mt19937 random(23);
  std::vector<std::vector<uint8_t>> records;
  // Small and large records, split ones with parts of every length near the
  // window's, and empty ones.
  for (std::size_t size : {std::size_t{0}, std::size_t{1}, std::size_t{1020}, std::size_t{1024},
                           std::size_t{4096}, (std::size_t{64} << 10) - 8, std::size_t{64} << 10,
                           (std::size_t{64} << 10) + 5, std::size_t{200} << 10}) {
    records.push_back(random_bytes(random, size));
    std::vector<uint8_t> split = random_bytes(random, size + 12);
    for (std::size_t at : {std::size_t{0}, (size / 8) * 4, size + 8}) {
      std::copy(kMagic.begin(), kMagic.end(), split.begin() + static_cast<std::ptrdiff_t>(at));
    }
    records.push_back(split);
  }
  write_records(path, records);
  const RecordFile file(path);
  std::vector<uint64_t> heads = {0};
  std::vector<uint8_t> record;
  for (std::size_t i = 0; i < records.size(); ++i) heads.push_back(file.read_at(heads[i], &record));
  REQUIRE(heads.back() == file.size());
  for (std::size_t i = 0; i < records.size(); ++i) {
    const uint64_t span = heads[i + 1] - heads[i];
    // Exact, short by one word, half, none, long by one word, far too long
    // (past the end of the file), and larger than the window.
    for (uint64_t expected :
         {span, span - 4, span / 2, uint64_t{0}, span + 4, file.size() * 2, uint64_t{1} << 40}) {
      INFO("record " << i << " (" << records[i].size() << " bytes), expected span " << expected);
      record.assign(3, 0xff);
      CHECK(file.read_at(heads[i], &record, expected) == heads[i + 1]);
      CHECK(record == records[i]);
    }
  }
}

TEST_CASE("Threads read one RecordFile at once", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("shared.rec");
  std::mt19937 random(19);
  std::vector<std::vector<uint8_t>> records;
  std::vector<uint64_t> offsets;
  {
    RecordWriter writer(path);
    // 499 is prime: each thread's order below is a permutation.
    for (int i = 0; i < 499; ++i) {
      std::vector<uint8_t> record = random_bytes(random, random() % 3000);
      if (record.size() >= 8 && i % 3 == 0) std::copy(kMagic.begin(), kMagic.end(), record.begin());
      offsets.push_back(writer.write(record));
      records.push_back(record);
    }
    writer.close();
  }
  const RecordFile file(path);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < mismatches.size(); ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> record;
      // Each thread in another order, so that reads interleave.
      for (std::size_t k = 0; k < records.size(); ++k) {
        const std::size_t i = (k * (2 * t + 1) + t * 97) % records.size();
        file.read_at(offsets[i], &record);
        if (record != records[i]) ++mismatches[t];
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  CHECK(mismatches == std::vector<int>(4, 0));
}

TEST_CASE("RecordReader's [begin, end) reads the records whose heads lie in it",
          "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("golden.rec");
  write_file(path, kGoldenFile);
  const auto records = golden_records();
  auto read_range = [&](uint64_t begin, uint64_t end) {
    RecordReader reader(path, begin, end);
    std::vector<std::vector<uint8_t>> read;
    std::vector<uint8_t> record;
    while (reader.next(&record)) read.push_back(record);
    return read;
  };
  CHECK(read_range(0, 76) == records);
  CHECK(read_range(0, 1).size() == 1);
  CHECK(read_range(0, 16).size() == 1);
  // Ends inside the split record: it is read whole, as its head is before.
  CHECK(read_range(16, 20) == std::vector<std::vector<uint8_t>>{records[1]});
  CHECK(read_range(16, 49) == std::vector<std::vector<uint8_t>>{records[1], records[2]});
  CHECK(read_range(56, 1000) == std::vector<std::vector<uint8_t>>{records[3]});
  CHECK(read_range(76, 1000).empty());
  CHECK(read_range(16, 16).empty());
}

// The message of the herd::Error that `read` throws.
template <typename Read>
std::string error_of(Read read) {
  try {
    read();
  } catch (const Error& error) {
    return error.what();
  }
  FAIL("no herd::Error thrown");
  return "";
}

TEST_CASE("Broken framing is named by file and byte offset", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("bad.rec");
  auto reader_error = [&](const std::vector<uint8_t>& bytes) {
    write_file(path, bytes);
    RecordReader reader(path);
    std::vector<uint8_t> record;
    return error_of([&] {
      while (reader.next(&record)) {
      }
    });
  };
  auto file_error = [&](const std::vector<uint8_t>& bytes, uint64_t offset) {
    write_file(path, bytes);
    const RecordFile file(path);
    std::vector<uint8_t> record;
    return error_of([&] { file.read_at(offset, &record); });
  };
  const std::string where = "RecordIO file '" + path + "' at byte ";

  SECTION("truncated inside a part's header") {
    const std::vector<uint8_t> cut(kGoldenFile.begin(), kGoldenFile.begin() + 20);
    const std::string expected = where +
                                 "16: truncated: the file (20 bytes) ends 4 bytes into a "
                                 "part's 8-byte header";
    CHECK(reader_error(cut) == expected);
    CHECK(file_error(cut, 16) == expected);
  }
  SECTION("truncated inside a part's data") {
    const std::vector<uint8_t> cut(kGoldenFile.begin(), kGoldenFile.begin() + 12);
    const std::string expected = where +
                                 "0: the part's length 8 (8 bytes with padding) runs "
                                 "past the end of the file (12 bytes)";
    CHECK(reader_error(cut) == expected);
    CHECK(file_error(cut, 0) == expected);
  }
  SECTION("truncated inside the padding") {
    const std::vector<uint8_t> cut(kGoldenFile.begin(), kGoldenFile.begin() + 45);
    CHECK(reader_error(cut) == where +
                                   "36: the part's length 1 (4 bytes with padding) runs past the "
                                   "end of the file (45 bytes)");
  }
  SECTION("truncated between the parts of a split record") {
    const std::vector<uint8_t> cut(kGoldenFile.begin(), kGoldenFile.begin() + 36);
    const std::string expected =
        where +
        "36: truncated: the file (36 bytes) ends inside a split record, before its last "
        "part (cflag 3)";
    CHECK(reader_error(cut) == expected);
    CHECK(file_error(cut, 16) == expected);
  }
  SECTION("a wrong magic word") {
    std::vector<uint8_t> bytes = kGoldenFile;
    bytes[48] = 0x0b;
    CHECK(reader_error(bytes) == where +
                                     "48: not a record head: expected the magic word 0xced7230a, "
                                     "found 0xced7230b");
    bytes = kGoldenFile;
    bytes[27] = 0;  // the middle part of record 2
    CHECK(file_error(bytes, 16) == where +
                                       "24: broken framing: expected the magic word 0xced7230a, "
                                       "found 0x00d7230a");
  }
  SECTION("a length past the end of the file") {
    std::vector<uint8_t> bytes = kGoldenFile;
    bytes[60] = 0xf0;  // record 4's first part: 0x200000f0 = cflag 1, length 240
    CHECK(reader_error(bytes) == where +
                                     "56: the part's length 240 (240 bytes with padding) runs past "
                                     "the end of the file (76 bytes)");
    bytes = kGoldenFile;
    bytes[4] = 0xff, bytes[5] = 0xff, bytes[6] = 0xff, bytes[7] = 0x1f;  // length 2^29 - 1
    CHECK(file_error(bytes, 0) == where +
                                      "0: the part's length 536870911 (536870912 bytes with "
                                      "padding) runs past the end of the file (76 bytes)");
  }
  SECTION("parts out of order") {
    // A whole record (cflag 0) where record 2's middle part belongs.
    std::vector<uint8_t> bytes = kGoldenFile;
    bytes[31] = 0x00;
    CHECK(reader_error(bytes) ==
          where +
              "24: parts out of order: a part with cflag 0 (a whole record) follows one "
              "with cflag 1 (the first part of a split record), where a middle (2) or last (3) "
              "part belongs");
    // A first part after a first part.
    bytes = kGoldenFile;
    bytes[31] = 0x20;
    CHECK(file_error(bytes, 16).find(where + "24: parts out of order: a part with cflag 1") == 0);
  }
  SECTION("a file that begins with a middle part") {
    const std::vector<uint8_t> bytes(kGoldenFile.begin() + 24, kGoldenFile.end());
    CHECK(reader_error(bytes) == where +
                                     "0: not a record head: the part there has cflag 2 (a middle "
                                     "part of a split record), where a record begins with 0 or 1");
  }
  SECTION("read_at an offset that is no record head") {
    CHECK(file_error(kGoldenFile, 24) ==
          where +
              "24: not a record head: the part there has cflag 2 (a middle part of a split "
              "record), where a record begins with 0 or 1");
    CHECK(file_error(kGoldenFile, 36)
              .find(where + "36: not a record head: the part there has "
                            "cflag 3") == 0);
    CHECK(file_error(kGoldenFile, 6) ==
          where + "6: not a record head: record heads lie at multiples of 4 bytes");
    CHECK(file_error(kGoldenFile, 8) ==
          where + "8: not a record head: expected the magic word 0xced7230a, found 0x230a6261");
    CHECK(file_error(kGoldenFile, 76) ==
          where + "76: the end of the file: no record head there (file size 76)");
    CHECK(file_error(kGoldenFile, 80) ==
          where + "80: past the end of the file (76 bytes): no record head there");
  }
}

TEST_CASE("RecordReader throws again until it is moved", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("bad.rec");
  std::vector<uint8_t> bytes = kGoldenFile;
  bytes[48] = 0;  // record 3's magic
  write_file(path, bytes);
  RecordReader reader(path);
  std::vector<uint8_t> record;
  REQUIRE(reader.next(&record));
  REQUIRE(reader.next(&record));
  CHECK(reader.tell() == 48);
  CHECK_THROWS_WITH(reader.next(&record), Catch::Contains("at byte 48"));
  CHECK_THROWS_WITH(reader.next(&record), Catch::Contains("at byte 48"));
  reader.seek(56);
  REQUIRE(reader.next(&record));
  CHECK(record == golden_records()[3]);
  CHECK_FALSE(reader.next(&record));
  // A seek to an offset that is no head is found by the next read.
  reader.seek(24);
  CHECK_THROWS_WITH(reader.next(&record), Catch::Contains("at byte 24: not a record head"));
}

TEST_CASE("Files that cannot be opened or written are named", "[data][recordio]") {
  TempDir dir;
  const std::string missing = dir.file("missing.rec");
  CHECK_THROWS_WITH(RecordReader(missing),
                    "RecordIO file '" + missing + "' cannot be opened: No such file or directory");
  CHECK_THROWS_WITH(RecordFile(missing),
                    "RecordIO file '" + missing + "' cannot be opened: No such file or directory");
  CHECK_THROWS_WITH(RecordFile(dir.path()),
                    "RecordIO file '" + dir.path() + "' cannot be read: not a regular file");
  const std::string nowhere = dir.file("no/such/folder.rec");
  CHECK_THROWS_WITH(RecordWriter(nowhere),
                    "RecordIO file '" + nowhere + "' cannot be created: No such file or directory");
}

TEST_CASE("A full disk fails the writer's close, naming the file", "[data][recordio]") {
  // /dev/full takes any open and fails every write with ENOSPC.
  if (::access("/dev/full", W_OK) != 0) {
    WARN("no writable /dev/full: skipped");
    return;
  }
  RecordWriter writer("/dev/full");
  writer.write(bytes_of("a record"));
  CHECK_THROWS_WITH(writer.close(), Catch::StartsWith("RecordIO file '/dev/full': writing 16 "
                                                      "bytes at byte 0 failed: No space left"));
  // Reported again, also to a later write.
  CHECK_THROWS_WITH(writer.close(), Catch::Contains("No space left"));
  CHECK_THROWS_WITH(writer.write(bytes_of("more")), Catch::Contains("No space left"));
}

TEST_CASE("Writes after close and records too long are refused", "[data][recordio]") {
  TempDir dir;
  const std::string path = dir.file("closed.rec");
  RecordWriter writer(path);
  writer.close();
  writer.close();  // closing twice is harmless
  CHECK_THROWS_WITH(writer.write(bytes_of("x")),
                    "RecordIO file '" + path + "': written to after close()");
  const uint8_t byte = 0;
  RecordWriter open_writer(path);
  open_writer.write(bytes_of("abc"));
  CHECK_THROWS_WITH(open_writer.write(&byte, kMaxRecordLength + 1),
                    "RecordIO file '" + path +
                        "' at byte 12: a record of 536870912 bytes is longer than the 536870911 "
                        "bytes a part's length field holds");
  CHECK(open_writer.tell() == 12);
  std::vector<uint8_t> out;
  // The length is refused before any byte is read.
  CHECK_THROWS_WITH(append_record(&out, &byte, kMaxRecordLength + 1),
                    "RecordIO: a record of 536870912 bytes is longer than the 536870911 bytes a "
                    "part's length field holds");
  out.resize(6);
  CHECK_THROWS_WITH(append_record(&out, &byte, 1),
                    "RecordIO: a record is appended at byte 6 of the buffer, which is not a "
                    "multiple of 4");
}

}  // namespace
}  // namespace herd::data
