// herd::DistributedSampler against torch's DistributedSampler algorithm and
// the documented permutation, both rewritten here from their descriptions.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
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

}  // namespace
}  // namespace herd
