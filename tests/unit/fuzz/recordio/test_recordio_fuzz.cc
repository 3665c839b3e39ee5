// RecordIO's readers against mutated files: seeded mutants of a valid .rec
// (split records, empty records, image records), of its .idx, and of image
// records. Every reader either reads or throws herd::Error naming the file;
// any other exception fails the test, and under ASan and UBSan
// (scripts/test.sh) so does any overread or undefined operation. Where a
// reader answers, the answer is checked: a head found by seek_record_head is
// the first one at or after the offset, and an unpacked image record's parts
// lie within it.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/image_record.h"
#include "herd/data/record_index.h"
#include "herd/data/recordio.h"
#include "herd/error.h"
#include "tests/unit/fuzz/byte_mutator.h"
#include "tests/unit/fuzz/mutant_file.h"

namespace herd::data {
namespace {

using testing::MutantFile;

constexpr uint64_t kSeed = 0x7265636f7264696f;  // "recordio"
constexpr int kRecMutants = 6000;
constexpr int kIdxMutants = 3000;
constexpr int kImageMutants = 20000;

const uint8_t kMagic[4] = {0x0a, 0x23, 0xd7, 0xce};

// The valid records: image records with one label and with several, raw
// payloads of lengths 0 to 9, and records whose aligned magic words split
// them into parts.
std::vector<std::vector<uint8_t>> valid_records() {
  std::vector<std::vector<uint8_t>> records;
  for (uint64_t id = 0; id < 6; ++id) {
    ImageRecordHeader header;
    header.label = static_cast<float>(id);
    header.id = id;
    std::vector<uint8_t> pixels(id * 3 + 1, static_cast<uint8_t>(0x40 + id));
    if (id % 2 == 1) std::copy(kMagic, kMagic + 4, pixels.begin());
    const std::vector<float> labels =
        id < 3 ? std::vector<float>{} : std::vector<float>(id, 0.5f * static_cast<float>(id));
    records.push_back(pack_image_record(header, labels, pixels.data(), pixels.size()));
  }
  for (std::size_t length = 0; length <= 9; ++length) {
    records.push_back(std::vector<uint8_t>(length, static_cast<uint8_t>(length)));
  }
  records.push_back({kMagic[0], kMagic[1], kMagic[2], kMagic[3]});
  records.push_back({kMagic[0], kMagic[1], kMagic[2], kMagic[3], kMagic[0], kMagic[1], kMagic[2],
                     kMagic[3], 'e', 'n', 'd'});
  records.push_back({'a', 'b', kMagic[0], kMagic[1], kMagic[2], kMagic[3], 'c', 'd'});
  return records;
}

void expect_named(const Error& error, const std::string& name) {
  const std::string message = error.what();
  INFO(message);
  CHECK(message.find(name) != std::string::npos);
}

// A record that reads is unpacked as an image record too: it unpacks into
// parts within it, or throws naming `where`.
void unpack_checked(const std::vector<uint8_t>& record, const std::string& where) {
  try {
    const ImageRecord unpacked = unpack_image_record(record.data(), record.size(), where);
    CHECK(unpacked.payload >= record.data() + kImageRecordHeaderSize);
    CHECK(unpacked.payload + unpacked.payload_size == record.data() + record.size());
    CHECK(unpacked.labels.size() == (unpacked.header.flag == 0 ? 1 : unpacked.header.flag));
  } catch (const Error& error) {
    expect_named(error, where);
  }
}

struct Outcomes {
  int read_through = 0;
  int refused = 0;
};

// Every reader of the framing over the file at `path`; counts whether
// RecordReader read it to the end.
void read_every_way(const std::string& path, const std::vector<uint64_t>& valid_offsets,
                    testing::ByteMutator& random, Outcomes& outcomes) {
  std::vector<uint8_t> record;
  try {
    RecordReader reader(path);
    uint64_t records = 0;
    while (reader.next(&record)) {
      unpack_checked(record, "record");
      ++records;
    }
    CHECK(reader.tell() == reader.size());
    ++outcomes.read_through;
  } catch (const Error& error) {
    expect_named(error, path);
    ++outcomes.refused;
  }

  const RecordFile file(path);
  const uint64_t size = file.size();
  for (const uint64_t offset : valid_offsets) {
    try {
      const uint64_t next = file.read_at(offset, &record);
      CHECK(next > offset);
      CHECK(next <= size);
    } catch (const Error& error) {
      expect_named(error, path);
    }
  }
  for (int probe = 0; probe < 4; ++probe) {
    const uint64_t from = random.below(size + 9);
    const uint64_t head = file.seek_record_head(from);
    CHECK(head <= size);
    if (head < size) {
      CHECK(head >= from);
      CHECK(file.is_record_head(head));
    }
    // No head lies between the offset and the one found.
    for (uint64_t at = (from + 3) / 4 * 4; at < head; at += 4) CHECK_FALSE(file.is_record_head(at));
    // A range read starting at the head found ends within the file.
    try {
      RecordReader part(path, head, head + random.below(size + 1));
      while (part.next(&record)) {
      }
      CHECK(part.tell() <= size);
    } catch (const Error& error) {
      expect_named(error, path);
    }
  }
}

TEST_CASE("RecordIO fuzz: mutated .rec files read or throw herd::Error", "[data][fuzz]") {
  MutantFile rec("recordio.rec");
  MutantFile idx("recordio.idx");
  const std::vector<std::vector<uint8_t>> records = valid_records();
  std::vector<uint64_t> offsets;
  {
    IndexedRecordWriter writer(idx.path(), rec.path());
    for (std::size_t i = 0; i < records.size(); ++i) {
      offsets.push_back(
          writer.write(static_cast<int64_t>(i), records[i].data(), records[i].size()));
    }
    writer.close();
  }
  const std::vector<uint8_t> valid = rec.read();
  {
    RecordReader reader(rec.path());
    std::vector<uint8_t> record;
    for (const auto& expected : records) {
      REQUIRE(reader.next(&record));
      REQUIRE(record == expected);
    }
    REQUIRE_FALSE(reader.next(&record));
  }

  testing::ByteMutator mutator(kSeed);
  Outcomes outcomes;
  int indexed_reads = 0;
  for (int i = 0; i < kRecMutants; ++i) {
    const std::vector<uint8_t> mutant = mutator.mutate(valid);
    INFO("seed " << kSeed << ", .rec mutant " << i << " of " << mutant.size() << " bytes");
    rec.write(mutant);
    read_every_way(rec.path(), offsets, mutator, outcomes);
    // The valid .idx over the mutated .rec.
    try {
      const IndexedRecordReader reader(idx.path(), rec.path());
      std::vector<uint8_t> record;
      for (const int64_t key : reader.keys()) {
        try {
          reader.read(key, &record);
          ++indexed_reads;
        } catch (const Error& error) {
          expect_named(error, rec.path());
        }
      }
    } catch (const Error& error) {
      expect_named(error, idx.path());
    }
  }
  // Both outcomes were reached.
  CHECK(outcomes.read_through > 0);
  CHECK(outcomes.refused > kRecMutants / 10);
  CHECK(indexed_reads > 0);
}

TEST_CASE("RecordIO fuzz: mutated .idx files read or throw herd::Error", "[data][fuzz]") {
  MutantFile rec("recordio.rec");
  MutantFile idx("recordio.idx");
  const std::vector<std::vector<uint8_t>> records = valid_records();
  {
    IndexedRecordWriter writer(idx.path(), rec.path());
    for (std::size_t i = 0; i < records.size(); ++i) {
      writer.write(static_cast<int64_t>(i) * 3 - 7, records[i].data(), records[i].size());
    }
    writer.close();
  }
  const std::vector<uint8_t> valid = idx.read();
  testing::ByteMutator mutator(kSeed + 1);
  int opened = 0;
  int refused = 0;
  for (int i = 0; i < kIdxMutants; ++i) {
    const std::vector<uint8_t> mutant = mutator.mutate(valid);
    INFO("seed " << kSeed + 1 << ", .idx mutant " << i << " of " << mutant.size() << " bytes");
    idx.write(mutant);
    try {
      const std::vector<IndexEntry> entries = read_index(idx.path());
      const IndexedRecordReader reader(idx.path(), rec.path());
      CHECK(reader.keys().size() == entries.size());
      ++opened;
      std::vector<uint8_t> record;
      for (const int64_t key : reader.keys()) {
        try {
          reader.read(key, &record);
          unpack_checked(record, "record");
        } catch (const Error& error) {
          // Offsets that are no head name both files.
          expect_named(error, idx.path());
          expect_named(error, rec.path());
        }
      }
    } catch (const Error& error) {
      expect_named(error, idx.path());
      ++refused;
    }
  }
  CHECK(opened > 0);
  CHECK(refused > 0);
}

TEST_CASE("RecordIO fuzz: mutated image records unpack or throw herd::Error", "[data][fuzz]") {
  const std::vector<std::vector<uint8_t>> records = valid_records();
  testing::ByteMutator mutator(kSeed + 2);
  for (int i = 0; i < kImageMutants; ++i) {
    const std::vector<uint8_t>& valid = records[mutator.below(6)];
    const std::vector<uint8_t> mutant = mutator.mutate(valid);
    INFO("seed " << kSeed + 2 << ", image-record mutant " << i << " of " << mutant.size()
                 << " bytes");
    unpack_checked(mutant, "mutant " + std::to_string(i));
  }
}

}  // namespace
}  // namespace herd::data
