// herd-rec info and verify: a .rec read from its first record to its last.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace herd::rec_tool {

struct RecordStats {
  std::string path;
  bool raw = false;  // payloads are the whole records, no image header read
  uint64_t bytes = 0;
  uint64_t records = 0;
  // Records holding the magic word at a 4-aligned offset, which the writer
  // split into parts, and the magic words so escaped.
  uint64_t split_records = 0;
  uint64_t escaped_magic_words = 0;
  // Payload: the bytes after the image header and its labels, or the whole
  // record with `raw`.
  uint64_t payload_total = 0;
  uint64_t payload_min = 0;
  uint64_t payload_max = 0;
  // Records with one label (flag 0), by label; NaN labels apart.
  std::map<float, uint64_t> labels;
  uint64_t nan_labels = 0;
  // Records with several labels (flag k > 0), by k.
  std::map<uint32_t, uint64_t> label_counts;
};

// Reads every record. Throws herd::Error naming the file and offset of
// broken framing, or of a record too short for its image header (unless
// `raw`).
RecordStats collect_stats(const std::string& rec_path, bool raw);
// "name: value" lines; then "label L: N" per label value (at most 100, the
// smallest) and "labels per record K: N" per count of several labels.
std::string format_stats(const RecordStats& stats);

struct VerifySummary {
  uint64_t bytes = 0;
  uint64_t records = 0;
  uint64_t split_records = 0;
  uint64_t indexed = 0;  // .idx lines checked
};

// Walks the framing of the whole file; with an `idx_path` (may be empty),
// also checks that every .idx offset is the head of a record found by the
// walk. Throws herd::Error naming the first bad byte offset and why, or the
// .idx line or key at fault.
VerifySummary verify(const std::string& rec_path, const std::string& idx_path);

// The number of 4-aligned magic words in `size` bytes at `data`.
uint64_t aligned_magic_words(const uint8_t* data, std::size_t size);

}  // namespace herd::rec_tool
