// herd::DistributedSampler against torch's DistributedSampler algorithm and
// the documented permutation, both rewritten here from their descriptions;
// contiguous_part and PartSampler against dmlc-core's split by index and
// MXNet's round_batch padding, likewise.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/sampler.h"

namespace herd {
namespace {

using Indices = std::vector<int64_t>;

// include/herd/train/sampler.h's permutation, from its comment.
Indices documented_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  auto splitmix64 = [](uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  };
  std::mt19937_64 engine(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch))));
  Indices order;
  for (int64_t i = 0; i < n; ++i) order.push_back(i);
  for (int64_t i = n - 1; i >= 1; --i) {
    // Accept x below the largest multiple of `range` that fits in 2^64:
    // 2^64 - (2^64 mod range), with 2^64 mod range = ((2^64 - 1) mod range + 1) mod range.
    const auto range = static_cast<uint64_t>(i) + 1;
    const uint64_t excess = (UINT64_MAX % range + 1) % range;
    uint64_t x = engine();
    while (excess != 0 && x > UINT64_MAX - excess) x = engine();
    std::swap(order[i], order[static_cast<std::size_t>(x % range)]);
  }
  return order;
}

// torch.utils.data.DistributedSampler.__iter__, step by step on lists.
Indices torch_shard(Indices order, int replicas, int rank, bool drop_last) {
  const auto n = static_cast<int64_t>(order.size());
  const int64_t num_samples = drop_last && n % replicas != 0
                                  ? (n - replicas + replicas - 1) / replicas  // ceil((n-R)/R)
                                  : (n + replicas - 1) / replicas;
  const int64_t total = num_samples * replicas;
  if (!drop_last) {
    const Indices original = order;
    while (static_cast<int64_t>(order.size()) < total) {
      for (int64_t x : original) {
        if (static_cast<int64_t>(order.size()) == total) break;
        order.push_back(x);
      }
    }
  } else {
    order.resize(static_cast<std::size_t>(std::max<int64_t>(total, 0)));
  }
  Indices shard;
  for (int64_t p = rank; p < total; p += replicas) shard.push_back(order[p]);
  return shard;
}

TEST_CASE("the engine is the standard's mt19937_64", "[sampler]") {
  // [rand.predef]: the 10000th output of a default-constructed mt19937_64.
  std::mt19937_64 engine;
  engine.discard(9999);
  CHECK(engine() == 9981545732273789042ull);
}

TEST_CASE("epoch_permutation is the documented Fisher-Yates", "[sampler]") {
  for (int64_t n : {0, 1, 2, 7, 100, 1000}) {
    for (uint64_t seed : {0ull, 42ull, 0xFFFFFFFFFFFFFFFFull}) {
      for (int64_t epoch : {0, 1, 5}) {
        INFO("n " << n << " seed " << seed << " epoch " << epoch);
        const Indices p = epoch_permutation(n, seed, epoch);
        CHECK(p == documented_permutation(n, seed, epoch));
        Indices sorted = p;
        std::sort(sorted.begin(), sorted.end());
        for (int64_t i = 0; i < n; ++i) CHECK(sorted[i] == i);
      }
    }
  }
  CHECK_THROWS_WITH(epoch_permutation(-3, 0, 0), Catch::Contains("-3"));
}

TEST_CASE("shards match torch's DistributedSampler for every remainder", "[sampler]") {
  for (int64_t n : {0, 1, 3, 8, 10, 11, 17}) {
    for (int replicas : {1, 2, 3, 4, 5}) {
      for (bool shuffle : {false, true}) {
        for (bool drop_last : {false, true}) {
          Indices order = shuffle ? documented_permutation(n, 7, 3) : Indices{};
          if (!shuffle) {
            for (int64_t i = 0; i < n; ++i) order.push_back(i);
          }
          for (int rank = 0; rank < replicas; ++rank) {
            INFO("n " << n << " replicas " << replicas << " rank " << rank << " shuffle " << shuffle
                      << " drop_last " << drop_last);
            DistributedSampler sampler(n, replicas, rank, 7, shuffle, drop_last);
            const Indices expected = torch_shard(order, replicas, rank, drop_last);
            CHECK(sampler.indices(3) == expected);
            CHECK(sampler.num_samples() == static_cast<int64_t>(expected.size()));
            CHECK(sampler.num_samples() ==
                  (drop_last ? n / replicas : (n + replicas - 1) / replicas));
          }
        }
      }
    }
  }
}

// Every rank's shard for one epoch.
std::vector<Indices> all_shards(int64_t n, int replicas, uint64_t seed, bool drop_last,
                                int64_t epoch) {
  std::vector<Indices> shards;
  for (int rank = 0; rank < replicas; ++rank) {
    DistributedSampler sampler(n, replicas, rank, seed, true, drop_last);
    sampler.set_epoch(epoch);
    shards.push_back(sampler.indices());
  }
  return shards;
}

TEST_CASE("without padding, the shards partition the dataset", "[sampler]") {
  const std::vector<Indices> shards = all_shards(12, 4, 99, false, 0);
  std::vector<int> seen(12, 0);
  for (const Indices& shard : shards) {
    CHECK(shard.size() == 3);
    for (int64_t i : shard) ++seen[i];
  }
  for (int count : seen) CHECK(count == 1);
}

TEST_CASE("padding repeats the first samples of the order; drop_last drops the tail", "[sampler]") {
  // 10 samples on 4 ranks: padded to 12 (2 repeats), or cut to 8.
  const Indices order = epoch_permutation(10, 5, 2);
  std::map<int64_t, int> counts;
  for (const Indices& shard : all_shards(10, 4, 5, false, 2)) {
    CHECK(shard.size() == 3);
    for (int64_t i : shard) ++counts[i];
  }
  CHECK(counts.size() == 10);
  for (const auto& [index, count] : counts) {
    const bool repeated = index == order[0] || index == order[1];
    CHECK(count == (repeated ? 2 : 1));
  }
  counts.clear();
  for (const Indices& shard : all_shards(10, 4, 5, true, 2)) {
    CHECK(shard.size() == 2);
    for (int64_t i : shard) ++counts[i];
  }
  CHECK(counts.size() == 8);
  for (const auto& [index, count] : counts) {
    CHECK(count == 1);
    CHECK(index != order[8]);
    CHECK(index != order[9]);
  }
  // Fewer samples than ranks: padding wraps around more than once.
  const std::vector<Indices> tiny = all_shards(2, 5, 1, false, 0);
  const Indices tiny_order = epoch_permutation(2, 1, 0);
  for (int rank = 0; rank < 5; ++rank) CHECK(tiny[rank] == Indices{tiny_order[rank % 2]});
  for (const Indices& shard : all_shards(2, 5, 1, true, 0)) CHECK(shard.empty());
}

TEST_CASE("each epoch is reshuffled, the same way on every rank", "[sampler]") {
  const std::vector<Indices> e0 = all_shards(64, 4, 1234, false, 0);
  const std::vector<Indices> e1 = all_shards(64, 4, 1234, false, 1);
  CHECK(e0 != e1);
  CHECK(e0 == all_shards(64, 4, 1234, false, 0));  // deterministic
  CHECK(e0 != all_shards(64, 4, 4321, false, 0));  // the seed matters
  // Rank r of any sampler with the same seed sees the same global order.
  DistributedSampler a(64, 4, 2, 1234), b(64, 4, 2, 1234);
  a.set_epoch(7);
  b.set_epoch(7);
  CHECK(a.epoch() == 7);
  CHECK(a.indices() == b.indices());
  CHECK(a.indices() == a.indices(7));
  // Without shuffle, every epoch is the same strided order.
  DistributedSampler plain(10, 3, 1, 1234, false);
  CHECK(plain.indices(0) == Indices{1, 4, 7, 0});
  CHECK(plain.indices(5) == plain.indices(0));
}

TEST_CASE("invalid sampler arguments are refused, naming the value", "[sampler]") {
  CHECK_THROWS_WITH(DistributedSampler(-1, 2, 0), Catch::Contains("dataset_size -1"));
  CHECK_THROWS_WITH(DistributedSampler(10, 0, 0), Catch::Contains("num_replicas 0"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, 4),
                    Catch::Contains("rank 4") && Catch::Contains("4)"));
  CHECK_THROWS_WITH(DistributedSampler(10, 4, -1), Catch::Contains("rank -1"));
  const DistributedSampler s(10, 4, 3, 8, true, true);
  CHECK(s.total_size() == 8);
  CHECK(s.dataset_size() == 10);
  CHECK(s.num_replicas() == 4);
  CHECK(s.rank() == 3);
  CHECK(s.seed() == 8);
  CHECK(s.shuffle());
  CHECK(s.drop_last());
}

TEST_CASE("contiguous parts are dmlc-core's split by index", "[sampler]") {
  // Hand-computed: 10 in 7 parts of ceil(10 / 7) = 2.
  const std::vector<std::pair<int64_t, int64_t>> ten_in_seven = {{0, 2},  {2, 4},   {4, 6},  {6, 8},
                                                                 {8, 10}, {10, 10}, {10, 10}};
  for (int p = 0; p < 7; ++p) CHECK(contiguous_part(10, p, 7) == ten_in_seven[p]);
  CHECK(contiguous_part(60000, 0, 2) == std::pair<int64_t, int64_t>{0, 30000});
  CHECK(contiguous_part(60000, 1, 2) == std::pair<int64_t, int64_t>{30000, 60000});
  CHECK(contiguous_part(7, 2, 3) == std::pair<int64_t, int64_t>{6, 7});
  CHECK(contiguous_part(0, 0, 1) == std::pair<int64_t, int64_t>{0, 0});
  CHECK(contiguous_part(1, 1, 2) == std::pair<int64_t, int64_t>{1, 1});
  // The parts, in part order, are 0..n-1 once each; none is larger than part 0.
  for (int64_t n : {0, 1, 5, 12, 13, 100}) {
    for (int parts = 1; parts <= 9; ++parts) {
      INFO("n " << n << " parts " << parts);
      int64_t next = 0;
      const int64_t largest = contiguous_part(n, 0, parts).second;
      for (int p = 0; p < parts; ++p) {
        const auto [first, last] = contiguous_part(n, p, parts);
        CHECK(first == next);
        CHECK(last >= first);
        CHECK(last - first <= largest);
        next = last;
      }
      CHECK(next == n);
    }
  }
  CHECK_THROWS_WITH(contiguous_part(-1, 0, 1), Catch::Contains("n -1"));
  CHECK_THROWS_WITH(contiguous_part(10, 0, 0), Catch::Contains("num_parts 0"));
  CHECK_THROWS_WITH(contiguous_part(10, 3, 3), Catch::Contains("part_index 3"));
  CHECK_THROWS_WITH(contiguous_part(10, -1, 3), Catch::Contains("part_index -1"));
}

// MXNet's round_batch on a list: the order, then its first entries again (as
// often as needed) until the length is reached; or the order cut short.
Indices round_batch(const Indices& order, int64_t length) {
  Indices out;
  while (static_cast<int64_t>(out.size()) < length) {
    for (int64_t x : order) {
      if (static_cast<int64_t>(out.size()) == length) break;
      out.push_back(x);
    }
  }
  return out;
}

TEST_CASE("a part's order is its permutation, repeated from its start to the length", "[sampler]") {
  // Hand-written: 3 samples to 7, unshuffled.
  CHECK(PartSampler(3, 7, 1, false).indices(0) == Indices{0, 1, 2, 0, 1, 2, 0});
  CHECK(PartSampler(5, 2, 1, false).indices(4) == Indices{0, 1});
  CHECK(PartSampler(0, 0).indices(0).empty());
  CHECK(PartSampler(4, 0).indices(0).empty());
  for (int64_t size : {1, 2, 5, 30}) {
    for (int64_t length : {0, 1, 5, 29, 30, 31, 64, 95}) {
      for (int64_t epoch : {0, 1, 6}) {
        INFO("part " << size << " length " << length << " epoch " << epoch);
        const PartSampler sampler(size, length, 42);
        const Indices expected = round_batch(documented_permutation(size, 42, epoch), length);
        CHECK(sampler.indices(epoch) == expected);
      }
    }
  }
  // Every epoch a new order, the same for the same seed; the seed matters.
  const PartSampler a(64, 64, 9), b(64, 64, 9), c(64, 64, 10);
  CHECK(a.indices(0) != a.indices(1));
  CHECK(a.indices(3) == b.indices(3));
  CHECK(a.indices(3) != c.indices(3));
  CHECK(a.part_size() == 64);
  CHECK(a.num_samples() == 64);
  CHECK(a.seed() == 9);
  CHECK(a.shuffle());
}

TEST_CASE("parts of different sizes give every worker the same number of steps", "[sampler]") {
  // 10 samples on 4 workers, batch 2: parts 3, 3, 3, 1; the largest takes
  // ceil(3 / 2) = 2 steps, so every part gives 4 samples.
  const int64_t n = 10, batch = 2;
  const int64_t largest = contiguous_part(n, 0, 4).second;
  const int64_t length = (largest + batch - 1) / batch * batch;
  CHECK(length == 4);
  for (int p = 0; p < 4; ++p) {
    const auto [first, last] = contiguous_part(n, p, 4);
    const Indices positions = PartSampler(last - first, length, 3).indices(2);
    CHECK(static_cast<int64_t>(positions.size()) == length);
    const Indices order = documented_permutation(last - first, 3, 2);
    CHECK(positions == round_batch(order, length));
  }
  // The last part (1 sample) repeats it 4 times.
  CHECK(PartSampler(1, 4, 3).indices(2) == Indices{0, 0, 0, 0});
}

TEST_CASE("invalid part sampler arguments are refused, naming the values", "[sampler]") {
  CHECK_THROWS_WITH(PartSampler(-1, 0), Catch::Contains("part_size -1"));
  CHECK_THROWS_WITH(PartSampler(3, -2), Catch::Contains("num_samples -2"));
  CHECK_THROWS_WITH(PartSampler(0, 5),
                    Catch::Contains("part_size 0") && Catch::Contains("num_samples 5"));
}

}  // namespace
}  // namespace herd
