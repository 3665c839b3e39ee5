#include "benchmarks/recordio/read_modes.h"

#include <algorithm>
#include <cstring>
#include <exception>
#include <numeric>
#include <thread>

#include "herd/recordio.h"

namespace herd::bench {

void ReadSummary::add(const std::vector<uint8_t>& record) {
  // The record's size and its first and last 8 bytes, mixed (splitmix64's
  // finalizer) and summed: cheap next to reading the record, and a record
  // lost, repeated or cut short changes the sum.
  uint64_t head = 0;
  uint64_t tail = 0;
  const std::size_t n = std::min<std::size_t>(record.size(), 8);
  if (n > 0) {
    std::memcpy(&head, record.data(), n);
    std::memcpy(&tail, record.data() + record.size() - n, n);
  }
  uint64_t x = head ^ (tail * 0x9e3779b97f4a7c15) ^ (record.size() << 1);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9;
  x = (x ^ (x >> 27)) * 0x94d049bb133111eb;
  x ^= x >> 31;
  ++records;
  bytes += record.size();
  digest += x;
}

void ReadSummary::merge(const ReadSummary& other) {
  records += other.records;
  bytes += other.bytes;
  digest += other.digest;
}

namespace {

// Runs read(p) for p = 0 .. parts - 1 on a thread each; rethrows the first
// part's error after every thread ended.
template <typename ReadPart>
ReadSummary run_parts(int parts, ReadPart read) {
  std::vector<ReadSummary> summaries(static_cast<std::size_t>(parts));
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(parts));
  std::vector<std::thread> threads;
  for (int p = 0; p < parts; ++p) {
    threads.emplace_back([&, p] {
      try {
        summaries[static_cast<std::size_t>(p)] = read(p);
      } catch (...) {
        errors[static_cast<std::size_t>(p)] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  ReadSummary total;
  for (int p = 0; p < parts; ++p) {
    if (errors[static_cast<std::size_t>(p)])
      std::rethrow_exception(errors[static_cast<std::size_t>(p)]);
    total.merge(summaries[static_cast<std::size_t>(p)]);
  }
  return total;
}

}  // namespace

ReadSummary read_sequential(const std::string& rec_path) {
  data::RecordReader reader(rec_path);
  ReadSummary summary;
  std::vector<uint8_t> record;
  while (reader.next(&record)) summary.add(record);
  return summary;
}

ReadSummary read_byte_range_parts(const std::string& rec_path, int parts) {
  return run_parts(parts, [&](int p) {
    const data::RecordShard shard = data::RecordShard::by_byte_range({rec_path}, p, parts);
    ReadSummary summary;
    std::vector<uint8_t> record;
    for (const data::FileByteRange& range : shard.byte_ranges()) {
      data::RecordReader reader(shard.files()[range.file].path(), range.begin, range.end);
      while (reader.next(&record)) summary.add(record);
    }
    return summary;
  });
}

ReadSummary read_index_parts(const std::string& rec_path, const std::string& idx_path, int parts) {
  return run_parts(parts, [&](int p) {
    const data::RecordShard shard = data::RecordShard::by_index(rec_path, idx_path, p, parts);
    ReadSummary summary;
    std::vector<uint8_t> record;
    for (std::size_t i = 0; i < shard.size(); ++i) {
      shard.read(i, &record);
      summary.add(record);
    }
    return summary;
  });
}

ReadSummary read_prefetched(const std::string& rec_path, const std::string& idx_path, int threads,
                            std::size_t capacity) {
  const data::RecordShard shard = data::RecordShard::by_index(rec_path, idx_path, 0, 1);
  std::vector<std::size_t> order(shard.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  data::RecordPrefetcher prefetcher(shard, std::move(order), threads, capacity);
  ReadSummary summary;
  std::vector<uint8_t> record;
  while (prefetcher.next(&record)) summary.add(record);
  return summary;
}

}  // namespace herd::bench
