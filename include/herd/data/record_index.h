// The .idx file beside a .rec: one text line per record, "key\toffset\n",
// the offset being that of the record's head (MXIndexedRecordIO, im2rec).
// Readers take any whitespace between the two numbers, as dmlc's does. Keys
// are integers here (im2rec's image indices, not necessarily in order);
// herd.recordio in Python also takes other key types, as MXNet's does.
//
// Errors name the .idx file and the line (a line that is not two integers, a
// key given twice, an offset past the .rec's end) or the .rec file and the
// offset (an offset that is not a record's head, found when it is read).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "herd/data/recordio.h"

namespace herd::data {

struct IndexEntry {
  int64_t key = 0;
  uint64_t offset = 0;
};

// The .idx beside `rec_path`, as im2rec names the pair: "train.rec" ->
// "train.idx"; a path not ending in ".rec" gets ".idx" appended.
std::string index_path_for(const std::string& rec_path);

// The entries of an .idx file in the file's order. Throws herd::Error naming
// the file and line number of the first bad line.
std::vector<IndexEntry> read_index(const std::string& idx_path);

// Writes a .rec and its .idx together (MXIndexedRecordIO in mode 'w').
class IndexedRecordWriter {
 public:
  IndexedRecordWriter(const std::string& idx_path, const std::string& rec_path);
  ~IndexedRecordWriter();
  IndexedRecordWriter(const IndexedRecordWriter&) = delete;
  IndexedRecordWriter& operator=(const IndexedRecordWriter&) = delete;

  // Appends the record and its index line; returns its offset. Throws for a
  // key already written.
  uint64_t write(int64_t key, const void* data, std::size_t size);
  void close();

 private:
  struct State;
  State* state_;
};

// Random access by key (MXIndexedRecordIO in mode 'r'); thread-safe reads.
class IndexedRecordReader {
 public:
  // Reads the whole .idx (small: one line per record) and opens the .rec.
  // Throws herd::Error for a bad .idx, a key given twice or an offset past
  // the .rec's end.
  IndexedRecordReader(const std::string& idx_path, const std::string& rec_path);

  // The keys in the .idx's order.
  const std::vector<int64_t>& keys() const { return keys_; }
  bool contains(int64_t key) const { return offsets_.count(key) != 0; }
  uint64_t offset(int64_t key) const;
  // The record of `key`; throws herd::Error naming the key when the .idx has
  // no such key, and naming the files and offset when it is no record head.
  void read(int64_t key, std::vector<uint8_t>* record) const;
  const RecordFile& file() const { return file_; }

 private:
  std::string idx_path_;
  RecordFile file_;
  std::vector<int64_t> keys_;
  std::unordered_map<int64_t, uint64_t> offsets_;
};

}  // namespace herd::data
