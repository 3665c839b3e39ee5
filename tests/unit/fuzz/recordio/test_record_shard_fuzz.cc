// RecordShard against mutated files: seeded mutants of a valid .rec (and of
// its .idx), each sharded into 1, 2 and 3 parts by byte range and by index
// and every record of every part read. Each shard is made and read, or
// throws herd::Error; any other exception fails the test, and under ASan
// and UBSan (scripts/test.sh) so does any overread. Where every part of a
// mutant reads, the parts together must be the records a sequential reader
// finds in the whole file: no record lost or read twice.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/record_shard.h"
#include "herd/error.h"
#include "tests/unit/data/shard_test_files.h"
#include "tests/unit/fuzz/byte_mutator.h"
#include "tests/unit/fuzz/mutant_file.h"

namespace herd::data {
namespace {

using testing::Payload;

constexpr uint64_t kSeed = 0x7368617264667a7a;  // "shardfzz"
constexpr int kRecMutants = 2500;
constexpr int kIdxMutants = 800;

// Short records only (a mutant is rewritten thousands of times), with
// split and empty ones among them.
std::vector<Payload> short_payloads() {
  std::vector<Payload> payloads = testing::varied_payloads(40, 0x66757a7a);
  for (Payload& payload : payloads) {
    if (payload.size() > 300) payload.resize(payload.size() % 300);
  }
  return payloads;
}

// Every record of the part, through records() and through byte_ranges().
std::vector<Payload> read_part(const RecordShard& shard) {
  std::vector<Payload> records = testing::shard_records(shard);
  Payload record;
  for (const FileByteRange& range : shard.byte_ranges()) {
    RecordReader reader(shard.files().at(range.file).path(), range.begin, range.end);
    while (reader.next(&record)) {
    }
  }
  return records;
}

// The whole file's records by the sequential reader, or false when it
// throws.
bool read_sequentially(const std::vector<std::string>& paths, std::vector<Payload>* records) {
  try {
    Payload record;
    for (const std::string& path : paths) {
      RecordReader reader(path);
      while (reader.next(&record)) records->push_back(record);
    }
    return true;
  } catch (const Error&) {
    return false;
  }
}

TEST_CASE("shard fuzz: mutated .rec files shard and read, or throw herd::Error",
          "[data][shard][fuzz]") {
  testing::TempDir dir;
  const std::string first = dir.file("first.rec");
  const std::string second = dir.file("second.rec");
  const std::string idx = dir.file("second.idx");
  const std::vector<Payload> payloads = short_payloads();
  const std::vector<Payload> head(payloads.begin(), payloads.begin() + 10);
  const std::vector<Payload> tail(payloads.begin() + 10, payloads.end());
  testing::write_records(first, head);
  const std::vector<uint64_t> offsets = testing::write_records(second, tail);
  std::vector<int64_t> keys;
  for (std::size_t i = 0; i < offsets.size(); ++i) keys.push_back(static_cast<int64_t>(i));
  testing::write_index_lines(idx, keys, offsets);
  const std::vector<uint8_t> valid = testing::read_file(second);

  testing::ByteMutator mutator(kSeed);
  int whole = 0;
  int refused = 0;
  for (int i = 0; i < kRecMutants; ++i) {
    testing::overwrite_file(second, mutator.mutate(valid));
    for (int parts = 1; parts <= 3; ++parts) {
      INFO("seed " << kSeed << ", mutant " << i << ", " << parts << " parts");
      // By byte range over both files: the mutant is the second.
      std::vector<Payload> joined;
      bool every_part_read = true;
      for (int p = 0; p < parts; ++p) {
        try {
          for (Payload& record : read_part(RecordShard::by_byte_range({first, second}, p, parts))) {
            joined.push_back(std::move(record));
          }
        } catch (const Error& e) {
          every_part_read = false;
          ++refused;
          CHECK(std::string(e.what()).find(".rec") != std::string::npos);
        }
      }
      if (every_part_read) {
        ++whole;
        std::vector<Payload> sequential;
        CHECK(read_sequentially({first, second}, &sequential));
        CHECK(joined == sequential);
      }
      // By index: the valid .idx against the mutant.
      for (int p = 0; p < parts; ++p) {
        try {
          read_part(RecordShard::by_index(second, idx, p, parts));
        } catch (const Error& e) {
          CHECK(std::string(e.what()).find("second.") != std::string::npos);
        }
      }
    }
  }
  // Both outcomes were reached, each often (about a sixth of the shardings
  // read whole).
  CHECK(whole > kRecMutants / 10);
  CHECK(refused > kRecMutants / 10);
}

TEST_CASE("shard fuzz: mutated .idx files shard and read, or throw herd::Error",
          "[data][shard][fuzz]") {
  testing::TempDir dir;
  const std::string rec = dir.file("data.rec");
  const std::string idx = dir.file("data.idx");
  const std::vector<uint64_t> offsets = testing::write_records(rec, short_payloads());
  std::vector<int64_t> keys;
  for (std::size_t i = 0; i < offsets.size(); ++i) keys.push_back(static_cast<int64_t>(i));
  testing::write_index_lines(idx, keys, offsets);
  const std::vector<uint8_t> valid = testing::read_file(idx);

  testing::ByteMutator mutator(kSeed + 1);
  int read = 0;
  for (int i = 0; i < kIdxMutants; ++i) {
    testing::overwrite_file(idx, mutator.mutate(valid));
    for (int parts = 1; parts <= 3; ++parts) {
      INFO("seed " << kSeed + 1 << ", mutant " << i << ", " << parts << " parts");
      for (int p = 0; p < parts; ++p) {
        try {
          read_part(RecordShard::by_index(rec, idx, p, parts));
          ++read;
        } catch (const Error& e) {
          CHECK(std::string(e.what()).find("data.") != std::string::npos);
        }
      }
    }
  }
  CHECK(read > 0);
}

}  // namespace
}  // namespace herd::data
