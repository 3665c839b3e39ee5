// RecordShard: both of dmlc-core's partitionings. The references are the
// payloads as written (every part's records, in part order, are every record
// once, in file order), counts and byte ranges computed by hand, and the
// 76-byte file dmlc-core writes for four records, laid out by hand.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/record_shard.h"
#include "herd/error.h"
#include "tests/unit/data/shard_test_files.h"

namespace herd::data {
namespace {

using Catch::Matchers::Contains;
using testing::Payload;
using testing::shard_records;

using Range = std::pair<uint64_t, uint64_t>;

// The golden file: four records, the second split in three parts around two
// aligned magic words, the fourth in two. Heads at 0, 16, 48 and 56; the
// parts of the second at 16, 24 and 36, of the fourth at 56 and 68.
std::vector<uint8_t> golden_file() {
  // As dmlc-core's writer lays it out, one part a line.
  const char* hex =
      "0a23d7ce 08000000 6162 0a23d7ce 6364"
      "0a23d7ce 00000020"
      "0a23d7ce 04000040 7778797a"
      "0a23d7ce 01000060 71000000"
      "0a23d7ce 00000000"
      "0a23d7ce 04000020 61626364"
      "0a23d7ce 00000060";
  std::vector<uint8_t> bytes;
  const auto digit = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
  for (const char* c = hex; *c != 0; ++c) {
    if (*c == ' ') continue;
    bytes.push_back(static_cast<uint8_t>(digit(c[0]) * 16 + digit(c[1])));
    ++c;
  }
  return bytes;
}

const uint8_t kM[4] = {0x0a, 0x23, 0xd7, 0xce};
std::vector<Payload> golden_payloads() {
  return {{'a', 'b', kM[0], kM[1], kM[2], kM[3], 'c', 'd'},
          {kM[0], kM[1], kM[2], kM[3], 'w', 'x', 'y', 'z', kM[0], kM[1], kM[2], kM[3], 'q'},
          {},
          {'a', 'b', 'c', 'd', kM[0], kM[1], kM[2], kM[3]}};
}

std::vector<uint64_t> offsets_of(const RecordShard& shard) {
  std::vector<uint64_t> offsets;
  for (const RecordLocation& where : shard.records()) offsets.push_back(where.offset);
  return offsets;
}

TEST_CASE("nominal_byte_range: ceil(total / parts) rounded up to 4 bytes", "[data][shard]") {
  // 76 bytes: steps 40, 28 (ceil 25.33 = 26 -> 28) and 20 (19 -> 20).
  CHECK(nominal_byte_range(76, 0, 1) == Range{0, 76});
  CHECK(nominal_byte_range(76, 0, 2) == Range{0, 40});
  CHECK(nominal_byte_range(76, 1, 2) == Range{40, 76});
  CHECK(nominal_byte_range(76, 0, 3) == Range{0, 28});
  CHECK(nominal_byte_range(76, 1, 3) == Range{28, 56});
  CHECK(nominal_byte_range(76, 2, 3) == Range{56, 76});
  CHECK(nominal_byte_range(76, 3, 4) == Range{60, 76});
  // 10 bytes in 7 parts: step ceil(10 / 7) = 2 -> 4; parts 3 to 6 empty.
  const Range ten[] = {{0, 4}, {4, 8}, {8, 10}, {10, 10}, {10, 10}, {10, 10}, {10, 10}};
  for (int p = 0; p < 7; ++p) CHECK(nominal_byte_range(10, p, 7) == ten[p]);
  // 1 GiB in 3 parts: ceil(1073741824 / 3) = 357913942 -> 357913944.
  CHECK(nominal_byte_range(uint64_t{1} << 30, 1, 3) == Range{357913944, 715827888});
  CHECK(nominal_byte_range(uint64_t{1} << 30, 2, 3) == Range{715827888, 1073741824});
  CHECK(nominal_byte_range(0, 2, 5) == Range{0, 0});
}

TEST_CASE("index_part: ceil(count / parts) records a part, the rest empty", "[data][shard]") {
  std::vector<std::size_t> sizes;
  for (int p = 0; p < 7; ++p) {
    const auto part = index_part(10, p, 7);
    sizes.push_back(part.second - part.first);
  }
  CHECK(sizes == std::vector<std::size_t>{2, 2, 2, 2, 2, 0, 0});
  CHECK(index_part(10, 2, 3) == std::pair<std::size_t, std::size_t>{8, 10});
  CHECK(index_part(10, 0, 1) == std::pair<std::size_t, std::size_t>{0, 10});
  CHECK(index_part(0, 3, 4) == std::pair<std::size_t, std::size_t>{0, 0});
}

TEST_CASE("A part outside [0, num_parts) is refused with the numbers", "[data][shard]") {
  CHECK_THROWS_WITH(nominal_byte_range(76, 2, 2), Contains("part_index 2") && Contains("= 2"));
  CHECK_THROWS_WITH(nominal_byte_range(76, -1, 2), Contains("part_index -1"));
  CHECK_THROWS_WITH(index_part(10, 0, 0), Contains("num_parts must be at least 1, got 0"));
  testing::TempDir dir;
  const std::string rec = dir.file("golden.rec");
  testing::write_file(rec, golden_file());
  CHECK_THROWS_AS(RecordShard::by_byte_range({rec}, 3, 3), Error);
  CHECK_THROWS_WITH(RecordShard::by_byte_range({}, 0, 1), Contains("no RecordIO file"));
}

TEST_CASE("By byte range, a part boundary inside a split record", "[data][shard]") {
  testing::TempDir dir;
  const std::string rec = dir.file("golden.rec");
  testing::write_file(rec, golden_file());
  const std::vector<Payload> payloads = golden_payloads();
  struct Case {
    int parts;
    std::vector<std::vector<uint64_t>> heads;  // each part's record heads
    std::vector<Range> ranges;                 // each part's byte range, {0, 0}: none
  };
  // 2 parts: byte 40 is the length word of the split record's last part
  // (36); the next head is 48. 3 parts: byte 28 lies in its middle part
  // (24), the head after it is 48; byte 56 is a head. 4 parts: 20 -> 48,
  // 40 -> 48 (an empty part), 60 lies in the fourth record's first part,
  // whose last part (68) is no head, so the third part runs to the end.
  const Case cases[] = {
      {1, {{0, 16, 48, 56}}, {{0, 76}}},
      {2, {{0, 16}, {48, 56}}, {{0, 48}, {48, 76}}},
      {3, {{0, 16}, {48}, {56}}, {{0, 48}, {48, 56}, {56, 76}}},
      {4, {{0, 16}, {}, {48, 56}, {}}, {{0, 48}, {0, 0}, {48, 76}, {0, 0}}},
  };
  for (const Case& c : cases) {
    INFO("parts " << c.parts);
    std::vector<Payload> joined;
    for (int p = 0; p < c.parts; ++p) {
      INFO("part " << p);
      const RecordShard shard = RecordShard::by_byte_range({rec}, p, c.parts);
      CHECK(shard.mode() == ShardMode::kByteRange);
      CHECK(shard.part_index() == p);
      CHECK(shard.num_parts() == c.parts);
      CHECK(offsets_of(shard) == c.heads[p]);
      if (c.ranges[p] == Range{0, 0}) {
        CHECK(shard.byte_ranges().empty());
      } else {
        REQUIRE(shard.byte_ranges().size() == 1);
        CHECK(shard.byte_ranges()[0].file == 0);
        CHECK(Range{shard.byte_ranges()[0].begin, shard.byte_ranges()[0].end} == c.ranges[p]);
      }
      for (Payload& record : shard_records(shard)) joined.push_back(std::move(record));
    }
    CHECK(joined == payloads);
  }
}

// Payloads split over files of their own; `sizes[f]` records go to file f.
struct FileSet {
  std::vector<std::string> paths;
  std::vector<Payload> payloads;  // all of them, in file order
};

FileSet write_file_set(testing::TempDir& dir, const std::vector<std::size_t>& sizes,
                       uint64_t seed) {
  FileSet set;
  const std::size_t total = std::accumulate(sizes.begin(), sizes.end(), std::size_t{0});
  set.payloads = testing::varied_payloads(total, seed);
  std::size_t next = 0;
  for (std::size_t f = 0; f < sizes.size(); ++f) {
    set.paths.push_back(dir.file("part" + std::to_string(f) + ".rec"));
    const std::vector<Payload> mine(
        set.payloads.begin() + static_cast<std::ptrdiff_t>(next),
        set.payloads.begin() + static_cast<std::ptrdiff_t>(next + sizes[f]));
    testing::write_records(set.paths.back(), mine);
    next += sizes[f];
  }
  return set;
}

TEST_CASE("By byte range, the parts together are every record once, in order", "[data][shard]") {
  testing::TempDir dir;
  // Several files, one of them empty and one holding a single record, so
  // that boundaries fall in files without a head after them.
  const FileSet set = write_file_set(dir, {40, 0, 1, 25, 60}, 0x73686172);
  for (int parts = 1; parts <= 7; ++parts) {
    INFO("parts " << parts);
    std::vector<Payload> joined;
    std::vector<RecordLocation> locations;
    for (int p = 0; p < parts; ++p) {
      const RecordShard shard = RecordShard::by_byte_range(set.paths, p, parts);
      // The byte ranges hold the same records as records().
      std::size_t in_ranges = 0;
      for (const FileByteRange& range : shard.byte_ranges()) {
        RecordReader reader(set.paths.at(range.file), range.begin, range.end);
        Payload record;
        while (reader.next(&record)) {
          REQUIRE(in_ranges < shard.size());
          CHECK(record == set.payloads[locations.size() + in_ranges]);
          ++in_ranges;
        }
      }
      CHECK(in_ranges == shard.size());
      for (const RecordLocation& where : shard.records()) locations.push_back(where);
      for (Payload& record : shard_records(shard)) joined.push_back(std::move(record));
    }
    CHECK(joined == set.payloads);
    // In file order: files ascending, offsets ascending within a file.
    for (std::size_t i = 1; i < locations.size(); ++i) {
      const RecordLocation& a = locations[i - 1];
      const RecordLocation& b = locations[i];
      CHECK((a.file < b.file || (a.file == b.file && a.offset < b.offset)));
    }
  }
}

TEST_CASE("By byte range, every part count up to the number of records", "[data][shard]") {
  // Few records of a few bytes: parts of every size, many of them empty.
  testing::TempDir dir;
  const std::string rec = dir.file("small.rec");
  std::vector<Payload> payloads;
  for (int i = 0; i < 9; ++i) payloads.push_back(Payload(static_cast<std::size_t>(i), 'a' + i));
  testing::write_records(rec, payloads);
  for (int parts = 1; parts <= 12; ++parts) {
    std::vector<Payload> joined;
    for (int p = 0; p < parts; ++p) {
      for (Payload& record : shard_records(RecordShard::by_byte_range({rec}, p, parts))) {
        joined.push_back(std::move(record));
      }
    }
    CHECK(joined == payloads);
  }
}

TEST_CASE("By index, parts of ceil(N / parts) records in the order of their offsets",
          "[data][shard]") {
  testing::TempDir dir;
  const std::string rec = dir.file("data.rec");
  const std::string idx = dir.file("data.idx");
  const std::vector<Payload> payloads = testing::varied_payloads(53, 0x696e6478);
  const std::vector<uint64_t> offsets = testing::write_records(rec, payloads);
  // The .idx lists the records in a shuffled order, under keys that are not
  // their positions: the shard sorts them by offset.
  std::vector<std::size_t> order(payloads.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(7));
  std::vector<int64_t> keys;
  std::vector<uint64_t> listed;
  for (std::size_t i : order) {
    keys.push_back(1000 - 3 * static_cast<int64_t>(i));
    listed.push_back(offsets[i]);
  }
  testing::write_index_lines(idx, keys, listed);

  for (int parts = 1; parts <= 7; ++parts) {
    INFO("parts " << parts);
    const std::size_t step =
        (payloads.size() + static_cast<std::size_t>(parts) - 1) / static_cast<std::size_t>(parts);
    std::vector<Payload> joined;
    for (int p = 0; p < parts; ++p) {
      const RecordShard shard = RecordShard::by_index(rec, idx, p, parts);
      CHECK(shard.mode() == ShardMode::kIndex);
      CHECK(shard.byte_ranges().empty());
      const std::size_t first = std::min(step * static_cast<std::size_t>(p), payloads.size());
      const std::size_t last = std::min(first + step, payloads.size());
      CHECK(offsets_of(shard) == std::vector<uint64_t>(offsets.begin() + static_cast<long>(first),
                                                       offsets.begin() + static_cast<long>(last)));
      for (Payload& record : shard_records(shard)) joined.push_back(std::move(record));
    }
    CHECK(joined == payloads);
  }
}

TEST_CASE("By index, 10 records in 7 parts: 2, 2, 2, 2, 2, 0, 0", "[data][shard]") {
  testing::TempDir dir;
  const std::string rec = dir.file("ten.rec");
  const std::string idx = dir.file("ten.idx");
  const std::vector<Payload> payloads = testing::varied_payloads(10, 10);
  const std::vector<uint64_t> offsets = testing::write_records(rec, payloads);
  testing::write_index_lines(idx, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, offsets);
  std::vector<std::size_t> sizes;
  std::vector<Payload> joined;
  for (int p = 0; p < 7; ++p) {
    const RecordShard shard = RecordShard::by_index(rec, idx, p, 7);
    sizes.push_back(shard.size());
    for (Payload& record : shard_records(shard)) joined.push_back(std::move(record));
  }
  CHECK(sizes == std::vector<std::size_t>{2, 2, 2, 2, 2, 0, 0});
  CHECK(joined == payloads);
}

TEST_CASE("Bad input to a shard names the file and the offset", "[data][shard]") {
  testing::TempDir dir;
  const std::string rec = dir.file("golden.rec");
  testing::write_file(rec, golden_file());

  SECTION("a missing file") {
    CHECK_THROWS_WITH(RecordShard::by_byte_range({rec, dir.file("missing.rec")}, 0, 2),
                      Contains("missing.rec"));
  }
  SECTION("a truncated file: its last part's length runs past the end") {
    std::vector<uint8_t> bytes = golden_file();
    bytes.resize(64);  // the fourth record's first part loses its data
    const std::string cut = dir.file("cut.rec");
    testing::write_file(cut, bytes);
    CHECK_THROWS_WITH(RecordShard::by_byte_range({cut}, 0, 1),
                      Contains("cut.rec") && Contains("at byte 56"));
    // Only the part holding the broken record sees it.
    CHECK(RecordShard::by_byte_range({cut}, 0, 2).size() == 2);
    CHECK_THROWS_WITH(RecordShard::by_byte_range({cut}, 1, 2), Contains("at byte 56"));
  }
  SECTION("a second file that does not begin with a record") {
    const std::string bad = dir.file("bad.rec");
    testing::write_file(bad, std::vector<uint8_t>{1, 2, 3, 4, 5, 6, 7, 8});
    CHECK_THROWS_WITH(
        RecordShard::by_byte_range({rec, bad}, 0, 1),
        Contains("bad.rec") && Contains("at byte 0") && Contains("not a record head"));
  }
  SECTION("a magic word inside a record that the writer would have escaped") {
    // A record of 16 bytes whose data begins with the magic word and an lrec
    // of cflag 0: byte 8 looks like a head. With 4 parts (step 8) part 0
    // ends there, inside its own record; part 1 begins there.
    const std::string fake = dir.file("fake.rec");
    testing::write_file(fake, std::vector<uint8_t>{0x0a, 0x23, 0xd7, 0xce, 16,  0,   0,   0,    //
                                                   0x0a, 0x23, 0xd7, 0xce, 0,   0,   0,   0,    //
                                                   'x',  'x',  'x',  'x',  'y', 'y', 'y', 'y',  //
                                                   0x0a, 0x23, 0xd7, 0xce, 0,   0,   0,   0});
    CHECK_THROWS_WITH(
        RecordShard::by_byte_range({fake}, 0, 4),
        Contains("fake.rec") && Contains("at byte 0") && Contains("runs to byte 24, past byte 8"));
    CHECK_THROWS_WITH(RecordShard::by_byte_range({fake}, 1, 4),
                      Contains("at byte 16") && Contains("not a record head"));
    CHECK(RecordShard::by_byte_range({fake}, 2, 4).size() == 0);
    CHECK(offsets_of(RecordShard::by_byte_range({fake}, 3, 4)) == std::vector<uint64_t>{24});
  }
  SECTION("an .idx offset past the end of the .rec") {
    const std::string idx = dir.file("past.idx");
    testing::write_index_lines(idx, {0, 1, 7}, {0, 16, 76});
    CHECK_THROWS_WITH(
        RecordShard::by_index(rec, idx, 0, 1),
        Contains("past.idx") && Contains("key 7") && Contains("offset 76") && Contains("76 bytes"));
  }
  SECTION("two keys with the same offset") {
    const std::string idx = dir.file("twice.idx");
    testing::write_index_lines(idx, {0, 1, 2}, {0, 48, 48});
    CHECK_THROWS_WITH(RecordShard::by_index(rec, idx, 0, 1),
                      Contains("twice.idx") && Contains("keys 1 and 2") && Contains("offset 48"));
  }
  SECTION("an .idx offset that is not a record head, found when it is read") {
    const std::string idx = dir.file("inside.idx");
    // 24 is the split record's middle part.
    testing::write_index_lines(idx, {0, 1, 2}, {0, 24, 48});
    const RecordShard shard = RecordShard::by_index(rec, idx, 0, 1);
    Payload record;
    shard.read(0, &record);
    CHECK(record == golden_payloads()[0]);
    CHECK_THROWS_WITH(shard.read(1, &record), Contains("golden.rec") && Contains("at byte 24") &&
                                                  Contains("not a record head"));
    CHECK(shard.describe(shard.records()[1]) == rec + " at byte 24");
    CHECK_THROWS_WITH(shard.read(RecordLocation{5, 0}, &record),
                      Contains("file #5") && Contains("has 1 files"));
    CHECK(shard.describe(RecordLocation{5, 16}) == "file #5 at byte 16");
  }
}

}  // namespace
}  // namespace herd::data
