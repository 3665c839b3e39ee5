// One worker's part of a RecordIO dataset, as MXNet's ImageRecordIter gives
// it with num_parts = workers, part_index = rank. Both of dmlc-core's modes:
//
// - by byte range (no .idx): the files are one concatenated stream of
//   `total` bytes; step = ceil(total / num_parts) rounded up to a multiple of
//   4; part p nominally spans [p * step, min((p + 1) * step, total)), and both
//   ends move forward to the next record head (RecordFile::seek_record_head;
//   the start of a file is a head). A record belongs to the part its head
//   lies in. Parts may be empty.
// - by index (.idx given): the .idx's offsets sorted, N records; step =
//   ceil(N / num_parts); part p holds records [p * step, min((p + 1) * step,
//   N)), empty when p * step >= N (N = 10, 7 parts: 2, 2, 2, 2, 2, 0, 0).
//
// Every part's records, taken in part order, are each record of the files
// once, in file order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "herd/data/recordio.h"

namespace herd::data {

enum class ShardMode { kByteRange, kIndex };

// Where a record lies: a file of the shard's list and its head's offset.
struct RecordLocation {
  uint32_t file = 0;
  uint64_t offset = 0;
};

// A stretch of one file holding whole records: their heads lie in
// [begin, end), and `end` is the head after the last (or the file's size).
struct FileByteRange {
  uint32_t file = 0;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Part `part_index`'s nominal byte range [first, second) of a `total`-byte
// stream, before its ends move to record heads. Throws herd::Error unless
// 0 <= part_index < num_parts.
std::pair<uint64_t, uint64_t> nominal_byte_range(uint64_t total, int part_index, int num_parts);
// Part `part_index`'s records [first, second) of `count` in index mode.
std::pair<std::size_t, std::size_t> index_part(std::size_t count, int part_index, int num_parts);

class RecordShard {
 public:
  // By byte range over `rec_paths` taken as one stream.
  static RecordShard by_byte_range(const std::vector<std::string>& rec_paths, int part_index,
                                   int num_parts);
  // By index: `idx_path` lists the records of `rec_path`; its offsets are
  // checked to be record heads as they are read.
  static RecordShard by_index(const std::string& rec_path, const std::string& idx_path,
                              int part_index, int num_parts);

  ShardMode mode() const { return mode_; }
  int part_index() const { return part_index_; }
  int num_parts() const { return num_parts_; }

  // The part's records in file order. By byte range, found by one pass over
  // the part's framing when the shard is made.
  const std::vector<RecordLocation>& records() const { return records_; }
  std::size_t size() const { return records_.size(); }
  // By byte range, the same records as one range per file the part holds
  // records of, in file order: a sequential pass reads them with
  // RecordReader(files()[r.file].path(), r.begin, r.end). Empty by index.
  const std::vector<FileByteRange>& byte_ranges() const { return byte_ranges_; }
  const std::vector<RecordFile>& files() const { return files_; }

  // Reads one record (thread-safe: pread).
  void read(const RecordLocation& where, std::vector<uint8_t>* record) const;
  // The part's record i; it reads small records with their header in one
  // call, knowing where the next one starts.
  void read(std::size_t i, std::vector<uint8_t>* record) const;
  // "PATH at byte OFFSET", for error messages about a record.
  std::string describe(const RecordLocation& where) const;

 private:
  RecordShard() = default;
  void check_file(const RecordLocation& where) const;
  ShardMode mode_ = ShardMode::kByteRange;
  int part_index_ = 0;
  int num_parts_ = 1;
  std::vector<RecordFile> files_;
  std::vector<RecordLocation> records_;
  std::vector<FileByteRange> byte_ranges_;
};

}  // namespace herd::data
