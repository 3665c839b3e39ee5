// herd-recordio-bench's readers: each reads a whole .rec file one way and
// returns what it saw, so that the benchmark can check every way saw the
// same records (docs/performance.md, "Reading RecordIO files").
//
// The sharded readers run one thread per part; the prefetcher has one
// consumer and `threads` workers. Every reader throws herd::Error on a bad
// file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd::bench {

// The records a reader saw: their count, their bytes and a digest that does
// not depend on the order the parts were read in.
struct ReadSummary {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t digest = 0;

  void add(const std::vector<uint8_t>& record);
  void merge(const ReadSummary& other);
  bool operator==(const ReadSummary& other) const {
    return records == other.records && bytes == other.bytes && digest == other.digest;
  }
};

// herd::data::RecordReader from start to end, on the calling thread.
ReadSummary read_sequential(const std::string& rec_path);

// `parts` threads, thread p making part p by byte range and reading its
// byte ranges with RecordReader (the shard's walk over the part's framing
// included).
ReadSummary read_byte_range_parts(const std::string& rec_path, int parts);

// `parts` threads, thread p making part p by index and reading its records
// one by one (RecordShard::read: one pread each).
ReadSummary read_index_parts(const std::string& rec_path, const std::string& idx_path, int parts);

// The whole file as one part by index, in file order, through a
// RecordPrefetcher of `threads` workers and `capacity` records.
ReadSummary read_prefetched(const std::string& rec_path, const std::string& idx_path, int threads,
                            std::size_t capacity);

}  // namespace herd::bench
