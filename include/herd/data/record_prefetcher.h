// Reads a shard's records in a given order on worker threads, a bounded
// number ahead of the one consumer, and hands them out in that order: the
// prefetch queue behind --data-threads.
//
// Memory is bounded by `capacity` records in flight. The destructor stops
// and joins every worker, also when the consumer stops early or unwinds; no
// thread is detached. A worker's error (broken framing: file and offset) is
// rethrown by next() for that record, after every earlier record was handed
// out.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "herd/data/record_shard.h"

namespace herd::data {

class RecordPrefetcher {
 public:
  // Records shard.records()[order[k]] for k = 0, 1, ...; throws herd::Error
  // for threads < 1, capacity < 1 or an index outside the shard. `shard`
  // must outlive the prefetcher.
  RecordPrefetcher(const RecordShard& shard, std::vector<std::size_t> order, int threads,
                   std::size_t capacity);
  ~RecordPrefetcher();
  RecordPrefetcher(const RecordPrefetcher&) = delete;
  RecordPrefetcher& operator=(const RecordPrefetcher&) = delete;

  // The next record in order into `record` (swapped in: no copy); false
  // after the last.
  bool next(std::vector<uint8_t>* record);

 private:
  struct State;
  State* state_;
};

}  // namespace herd::data
