// herd::DistributedSampler, epoch_permutation, contiguous_part and
// PartSampler (include/herd/train/sampler.h): the documented shuffle, then
// torch's padding or truncation and a strided shard per rank, or a worker's
// own part, shuffled and repeated to a common length.
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <utility>

#include "herd/error.h"
#include "herd/train/sampler.h"

namespace herd {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [0, bound] without modulo bias: accept only draws below the
// largest multiple of bound + 1 that fits in 64 bits.
uint64_t uniform_up_to(std::mt19937_64& engine, uint64_t bound) {
  const uint64_t range = bound + 1;
  // 2^64 mod range, computed in 64 bits as (2^64 - range) mod range.
  const uint64_t excess = (0 - range) % range;
  const uint64_t limit = 0 - excess;  // 2^64 - excess; 0 stands for 2^64 (no rejection)
  uint64_t x = engine();
  while (limit != 0 && x >= limit) x = engine();
  return x % range;
}

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch) {
  if (n < 0) throw Error(fmt::format("epoch_permutation: n {} is negative", n));
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), int64_t{0});
  std::mt19937_64 engine(splitmix64(seed ^ splitmix64(static_cast<uint64_t>(epoch))));
  for (int64_t i = n - 1; i >= 1; --i) {
    const auto j = static_cast<int64_t>(uniform_up_to(engine, static_cast<uint64_t>(i)));
    std::swap(order[i], order[j]);
  }
  return order;
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank,
                                       uint64_t seed, bool shuffle, bool drop_last)
    : dataset_size_(dataset_size),
      num_replicas_(num_replicas),
      rank_(rank),
      seed_(seed),
      shuffle_(shuffle),
      drop_last_(drop_last),
      num_samples_(0) {
  if (dataset_size < 0) {
    throw Error(fmt::format("DistributedSampler: dataset_size {} is negative", dataset_size));
  }
  if (num_replicas < 1) {
    throw Error(fmt::format("DistributedSampler: num_replicas {} must be >= 1", num_replicas));
  }
  if (rank < 0 || rank >= num_replicas) {
    throw Error(fmt::format("DistributedSampler: rank {} is outside [0, {})", rank, num_replicas));
  }
  num_samples_ =
      drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = epoch_permutation(dataset_size_, seed_, epoch);
  } else {
    order.resize(static_cast<std::size_t>(dataset_size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  // Position p of the padded order is order[p mod n]: padding repeats the
  // order from its start, and truncation never reaches past n.
  std::vector<int64_t> shard;
  shard.reserve(static_cast<std::size_t>(num_samples_));
  for (int64_t k = 0; k < num_samples_; ++k) {
    const int64_t position = rank_ + k * num_replicas_;
    shard.push_back(order[static_cast<std::size_t>(position % dataset_size_)]);
  }
  return shard;
}

std::pair<int64_t, int64_t> contiguous_part(int64_t n, int part_index, int num_parts) {
  if (n < 0) throw Error(fmt::format("contiguous_part: n {} is negative", n));
  if (num_parts < 1) {
    throw Error(fmt::format("contiguous_part: num_parts {} must be >= 1", num_parts));
  }
  if (part_index < 0 || part_index >= num_parts) {
    throw Error(
        fmt::format("contiguous_part: part_index {} is outside [0, {})", part_index, num_parts));
  }
  const int64_t step = (n + num_parts - 1) / num_parts;
  const int64_t first = std::min(n, part_index * step);
  return {first, std::min(n, first + step)};
}

PartSampler::PartSampler(int64_t part_size, int64_t num_samples, uint64_t seed, bool shuffle)
    : part_size_(part_size), num_samples_(num_samples), seed_(seed), shuffle_(shuffle) {
  if (part_size < 0) {
    throw Error(fmt::format("PartSampler: part_size {} is negative", part_size));
  }
  if (num_samples < 0) {
    throw Error(fmt::format("PartSampler: num_samples {} is negative", num_samples));
  }
  if (part_size == 0 && num_samples > 0) {
    throw Error(fmt::format(
        "PartSampler: part_size 0 with num_samples {}: an empty part has nothing to repeat",
        num_samples));
  }
}

std::vector<int64_t> PartSampler::indices(int64_t epoch) const {
  std::vector<int64_t> order;
  if (shuffle_) {
    order = epoch_permutation(part_size_, seed_, epoch);
  } else {
    order.resize(static_cast<std::size_t>(part_size_));
    std::iota(order.begin(), order.end(), int64_t{0});
  }
  std::vector<int64_t> samples;
  samples.reserve(static_cast<std::size_t>(num_samples_));
  for (int64_t k = 0; k < num_samples_; ++k) {
    samples.push_back(order[static_cast<std::size_t>(k % part_size_)]);
  }
  return samples;
}

}  // namespace herd
