// RecordPrefetcher: the records of an order, in that order, whatever the
// number of threads and the capacity (and so the length of the runs the
// workers claim); a broken record's error at its place; destruction at any
// point. The reference is the payloads as written.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/data/record_prefetcher.h"
#include "herd/data/record_shard.h"
#include "herd/error.h"
#include "tests/unit/data/shard_test_files.h"

namespace herd::data {
namespace {

using Catch::Matchers::Contains;
using testing::Payload;

struct IndexedFile {
  std::string rec;
  std::string idx;
  std::vector<Payload> payloads;
  std::vector<uint64_t> offsets;
};

IndexedFile write_indexed(testing::TempDir& dir, std::size_t count, uint64_t seed) {
  IndexedFile file{
      dir.file("data.rec"), dir.file("data.idx"), testing::varied_payloads(count, seed), {}};
  file.offsets = testing::write_records(file.rec, file.payloads);
  std::vector<int64_t> keys(count);
  std::iota(keys.begin(), keys.end(), int64_t{0});
  testing::write_index_lines(file.idx, keys, file.offsets);
  return file;
}

TEST_CASE("The prefetcher hands out the order's records in order", "[data][prefetch]") {
  testing::TempDir dir;
  const IndexedFile file = write_indexed(dir, 120, 0x70726566);
  const RecordShard shard = RecordShard::by_byte_range({file.rec}, 0, 1);
  REQUIRE(shard.size() == file.payloads.size());
  // A shuffled order with repeats at its end, as a padded epoch has.
  std::vector<std::size_t> order(shard.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  order.insert(order.end(), order.begin(), order.begin() + 17);

  for (int threads = 1; threads <= 8; ++threads) {
    for (std::size_t capacity :
         {std::size_t{1}, std::size_t{3}, std::size_t{64}, std::size_t{1000}}) {
      INFO("threads " << threads << ", capacity " << capacity);
      RecordPrefetcher prefetcher(shard, order, threads, capacity);
      Payload record;
      std::size_t k = 0;
      while (prefetcher.next(&record)) {
        REQUIRE(k < order.size());
        CHECK(record == file.payloads[order[k]]);
        ++k;
      }
      CHECK(k == order.size());
      CHECK_FALSE(prefetcher.next(&record));
    }
  }
}

TEST_CASE("The prefetcher over a part by index, and over an empty order", "[data][prefetch]") {
  testing::TempDir dir;
  const IndexedFile file = write_indexed(dir, 30, 11);
  // Part 1 of 3 by index: records 10 to 19.
  const RecordShard shard = RecordShard::by_index(file.rec, file.idx, 1, 3);
  REQUIRE(shard.size() == 10);
  std::vector<std::size_t> backwards(10);
  std::iota(backwards.rbegin(), backwards.rend(), std::size_t{0});
  RecordPrefetcher prefetcher(shard, backwards, 4, 5);
  Payload record;
  for (std::size_t k = 0; k < 10; ++k) {
    REQUIRE(prefetcher.next(&record));
    CHECK(record == file.payloads[19 - k]);
  }
  CHECK_FALSE(prefetcher.next(&record));

  RecordPrefetcher empty(shard, {}, 3, 4);
  CHECK_FALSE(empty.next(&record));
}

TEST_CASE("A prefetcher destroyed early stops its threads", "[data][prefetch]") {
  testing::TempDir dir;
  const IndexedFile file = write_indexed(dir, 200, 12);
  const RecordShard shard = RecordShard::by_byte_range({file.rec}, 0, 1);
  std::vector<std::size_t> order(shard.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  for (int threads : {1, 4, 8}) {
    { RecordPrefetcher untouched(shard, order, threads, 8); }
    {
      RecordPrefetcher prefetcher(shard, order, threads, 2);
      Payload record;
      REQUIRE(prefetcher.next(&record));
      REQUIRE(prefetcher.next(&record));
      CHECK(record == file.payloads[1]);
    }
    // Destroyed while unwinding from the consumer's error.
    CHECK_THROWS_AS(
        [&] {
          RecordPrefetcher prefetcher(shard, order, threads, 16);
          Payload record;
          prefetcher.next(&record);
          throw Error("the consumer fails");
        }(),
        Error);
  }
}

TEST_CASE("A broken record's error comes at its place in the order", "[data][prefetch]") {
  testing::TempDir dir;
  const IndexedFile file = write_indexed(dir, 40, 13);
  // Record 25's .idx line points 4 bytes into it: its length word, no head.
  const std::size_t broken = 25;
  std::vector<uint64_t> offsets = file.offsets;
  offsets[broken] += 4;
  const std::string idx = dir.file("broken.idx");
  std::vector<int64_t> keys(offsets.size());
  std::iota(keys.begin(), keys.end(), int64_t{0});
  testing::write_index_lines(idx, keys, offsets);
  const RecordShard shard = RecordShard::by_index(file.rec, idx, 0, 1);
  std::vector<std::size_t> order(shard.size());
  std::iota(order.begin(), order.end(), std::size_t{0});

  for (int threads = 1; threads <= 8; ++threads) {
    INFO("threads " << threads);
    RecordPrefetcher prefetcher(shard, order, threads, 6);
    Payload record;
    for (std::size_t k = 0; k < broken; ++k) {
      REQUIRE(prefetcher.next(&record));
      CHECK(record == file.payloads[k]);
    }
    const std::string where = "at byte " + std::to_string(offsets[broken]);
    CHECK_THROWS_WITH(prefetcher.next(&record), Contains("data.rec") && Contains(where));
    // And again: the records after it are not handed out.
    CHECK_THROWS_WITH(prefetcher.next(&record), Contains(where));
  }
}

TEST_CASE("The prefetcher refuses bad arguments with the numbers", "[data][prefetch]") {
  testing::TempDir dir;
  const IndexedFile file = write_indexed(dir, 5, 14);
  const RecordShard shard = RecordShard::by_byte_range({file.rec}, 0, 1);
  CHECK_THROWS_WITH(RecordPrefetcher(shard, {0, 1}, 0, 4), Contains("threads") && Contains("0"));
  CHECK_THROWS_WITH(RecordPrefetcher(shard, {0, 1}, 2, 0), Contains("capacity"));
  CHECK_THROWS_WITH(RecordPrefetcher(shard, {0, 5, 1}, 2, 4),
                    Contains("position 1") && Contains("record 5") && Contains("has 5 records"));
}

}  // namespace
}  // namespace herd::data
