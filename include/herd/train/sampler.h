// herd::DistributedSampler: which samples of a dataset each rank reads in an
// epoch, as torch.utils.data.DistributedSampler chooses them. herd::PartSampler
// (below): the order in which a worker reads a contiguous part of its own, as
// MXNet's record iterators do with num_parts and part_index.
//
// Every rank builds a sampler with the same dataset size, number of replicas,
// seed and options, and its own rank; no communication is needed because the
// order is a pure function of (seed, epoch). The training loop calls
// set_epoch(e) at the start of each epoch (or indices(e) directly) so that
// every epoch sees a new order, the same on every rank.
//
// An epoch's indices, for n = dataset_size and R = num_replicas:
//   1. order: a permutation of 0..n-1 when shuffle is on (below), else 0..n-1.
//   2. remainder: with drop_last, each rank gets floor(n / R) samples and the
//      last n mod R of the order are dropped; without it, each rank gets
//      ceil(n / R) and the order is padded to R * ceil(n / R) by repeating it
//      from its start (wrapping around as often as needed when n < R).
//   3. shard: rank r takes positions r, r + R, r + 2R, ... of the padded (or
//      truncated) order. The shards are disjoint as positions, so without
//      padding every sample is read by exactly one rank.
//
// The permutation (deterministic on every platform and standard library):
//   key    = splitmix64(seed ^ splitmix64(epoch))   (splitmix64 as in Vigna's
//            reference: x += 0x9E3779B97F4A7C15; x = (x ^ x >> 30) *
//            0xBF58476D1CE4E5B9; x = (x ^ x >> 27) * 0x94D049BB133111EB;
//            return x ^ x >> 31)
//   engine = std::mt19937_64 seeded with key (the engine is fully specified
//            by the C++ standard; std::shuffle and the distributions are not)
//   Fisher-Yates: for i = n-1 down to 1: swap(order[i], order[j]) with j
//   drawn uniformly from [0, i] by rejection: draw x = engine() until
//   x < 2^64 - (2^64 mod (i + 1)), then j = x mod (i + 1).
//
// A sampler is a small value; const methods may be called from any thread.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace herd {

// The documented permutation of 0..n-1 for (seed, epoch). Throws herd::Error
// when n < 0.
std::vector<int64_t> epoch_permutation(int64_t n, uint64_t seed, int64_t epoch);

class DistributedSampler {
 public:
  // Throws herd::Error naming the value when dataset_size < 0,
  // num_replicas < 1 or rank is outside [0, num_replicas).
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, uint64_t seed = 0,
                     bool shuffle = true, bool drop_last = false);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }

  // This rank's indices for the current epoch, or for `epoch`.
  std::vector<int64_t> indices() const { return indices(epoch_); }
  std::vector<int64_t> indices(int64_t epoch) const;

  // Samples this rank reads per epoch: floor(n / R) with drop_last, else
  // ceil(n / R).
  int64_t num_samples() const { return num_samples_; }
  // Samples all ranks read per epoch: num_samples() * num_replicas.
  int64_t total_size() const { return num_samples_ * num_replicas_; }

  int64_t dataset_size() const { return dataset_size_; }
  int num_replicas() const { return num_replicas_; }
  int rank() const { return rank_; }
  uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }
  bool drop_last() const { return drop_last_; }

 private:
  int64_t dataset_size_;
  int num_replicas_;
  int rank_;
  uint64_t seed_;
  bool shuffle_;
  bool drop_last_;
  int64_t num_samples_;
  int64_t epoch_ = 0;
};

// Part `part_index` of `n` samples split into `num_parts` contiguous parts,
// as [first, second): [p * s, min((p + 1) * s, n)) with s = ceil(n / parts),
// empty when p * s >= n. This is how dmlc-core splits a RecordIO file by its
// .idx (10 samples in 7 parts: 2, 2, 2, 2, 2, 0, 0); part 0 is the largest.
// Throws herd::Error naming the value when n < 0, num_parts < 1 or
// part_index is outside [0, num_parts).
std::pair<int64_t, int64_t> contiguous_part(int64_t n, int part_index, int num_parts);

// herd::PartSampler: the order of one worker's own part of a dataset in an
// epoch, where each worker reads a part of its own (a RecordIO file's part,
// or a contiguous_part) rather than a stride of one global order.
//
// An epoch's indices are positions 0..part_size-1 within the part:
//   1. order: epoch_permutation(part_size, seed, epoch) when shuffle is on
//      (the same permutation as DistributedSampler's), else 0..part_size-1;
//   2. length: the order repeated from its start as often as needed to make
//      num_samples entries, or cut to num_samples. Parts of different sizes
//      thus give the same number of samples, so every worker runs the same
//      number of steps: pass num_samples = the largest part rounded up to
//      whole batches, and a shorter part's last batches repeat its first
//      samples, as MXNet's round_batch pads the last batch.
// A pure function of (part_size, num_samples, seed, epoch): no communication.
class PartSampler {
 public:
  // Throws herd::Error naming the values when part_size < 0, num_samples < 0,
  // or part_size == 0 while num_samples > 0 (an empty part has nothing to
  // repeat).
  PartSampler(int64_t part_size, int64_t num_samples, uint64_t seed = 0, bool shuffle = true);

  // The positions within the part that this worker reads in `epoch`, in order.
  std::vector<int64_t> indices(int64_t epoch) const;

  int64_t part_size() const { return part_size_; }
  int64_t num_samples() const { return num_samples_; }
  uint64_t seed() const { return seed_; }
  bool shuffle() const { return shuffle_; }

 private:
  int64_t part_size_;
  int64_t num_samples_;
  uint64_t seed_;
  bool shuffle_;
};

}  // namespace herd
