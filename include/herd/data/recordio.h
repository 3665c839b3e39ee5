// RecordIO: the .rec record framing of dmlc-core and MXNet, byte for byte.
//
// A file is a sequence of parts, each 4-byte aligned:
//   uint32 magic = kRecordMagic             (bytes on disk: 0a 23 d7 ce)
//   uint32 lrec  = (cflag << 29) | length   (length < 2^29)
//   uint8  data[length], then zero padding to the next multiple of 4
// cflag 0 is a whole record; 1, 2 and 3 are the first, middle and last part of
// a record that the writer split where the payload holds the magic word at a
// 4-aligned offset (those 4 bytes are dropped from the parts and restored by
// the reader). So an aligned magic followed by an lrec with cflag 0 or 1 is
// always a record's head, which is what sharding by byte range seeks.
// Integers are little-endian (every platform MXNet wrote files on).
//
// Errors: every reader throws herd::Error naming the file and the byte offset
// of the part at fault (a truncated part, another word where the magic
// belongs, a length running past the end of the file, parts of a split record
// out of order, an offset that is not a record's head); none reads short
// silently or crashes on any input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd::data {

constexpr uint32_t kRecordMagic = 0xced7230a;
// A part's length field has 29 bits; a record longer than this is refused.
constexpr uint64_t kMaxRecordLength = (uint64_t{1} << 29) - 1;

// The framing of one record as the writer lays it out: appends the parts of
// `size` bytes at `data` to `out` (whose size must be a multiple of 4) and
// returns how many aligned magic words were escaped (dmlc's except_counter).
// Throws herd::Error for a record longer than kMaxRecordLength.
uint64_t append_record(std::vector<uint8_t>* out, const void* data, std::size_t size);

// Writes records to a new file (truncating one that exists). Buffered; close()
// (or the destructor, which swallows errors) flushes. Not thread-safe.
class RecordWriter {
 public:
  // Throws herd::Error naming `path` when it cannot be created.
  explicit RecordWriter(const std::string& path);
  ~RecordWriter();
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;

  // Appends one record and returns the byte offset of its head (what tell()
  // said before), the offset an .idx line records.
  uint64_t write(const void* data, std::size_t size);
  uint64_t write(const std::vector<uint8_t>& record) { return write(record.data(), record.size()); }
  // The offset the next record's head will have.
  uint64_t tell() const;
  // Aligned magic words escaped so far.
  uint64_t escaped_magic_count() const;
  void flush();
  // Flushes and closes; throws herd::Error naming the file when a write
  // failed (disk full). Further writes throw.
  void close();
  const std::string& path() const;

 private:
  struct State;
  State* state_;
};

// A .rec file opened for reading at any offset (pread; no whole-file load).
// All const members are thread-safe: several threads may read one file.
class RecordFile {
 public:
  // Throws herd::Error naming `path` when it cannot be opened.
  explicit RecordFile(const std::string& path);
  ~RecordFile();
  RecordFile(RecordFile&& other) noexcept;
  RecordFile& operator=(RecordFile&& other) noexcept;
  RecordFile(const RecordFile&) = delete;
  RecordFile& operator=(const RecordFile&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

  // Reads the record whose head is at `offset` into `record` (its parts
  // joined, escaped magic words restored; the vector is resized, its
  // capacity reused) and returns the offset just past it: the next record's
  // head, or size() after the last one. Throws herd::Error naming the file
  // and offset when `offset` is not a record head or the framing is broken.
  uint64_t read_at(uint64_t offset, std::vector<uint8_t>* record) const;
  // The same, told that the record probably takes `expected_span` bytes
  // from `offset` (the next record's offset minus this one's, as a shard or
  // an index knows): a record of up to 64 KiB is then read with its header
  // in one system call. A wrong guess costs time, never correctness.
  uint64_t read_at(uint64_t offset, std::vector<uint8_t>* record, uint64_t expected_span) const;
  // Whether `offset` (4-aligned, else false) holds kRecordMagic followed by
  // an lrec whose cflag is 0 or 1.
  bool is_record_head(uint64_t offset) const;
  // The first record head at or after `offset` rounded up to a multiple of
  // 4, scanning aligned words; size() when there is none.
  uint64_t seek_record_head(uint64_t offset) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Reads a .rec file's records one after another, as MXRecordIO does in
// mode 'r', through a large buffer (sequential reads at page-cache speed).
// Not thread-safe.
class RecordReader {
 public:
  // Throws herd::Error naming `path` when it cannot be opened.
  explicit RecordReader(const std::string& path);
  // Only the records whose heads lie in [begin, end): `begin` must be a
  // record head (or the file's size); reading stops at the first head at or
  // after `end`, as a part of a sharded file does.
  RecordReader(const std::string& path, uint64_t begin, uint64_t end);
  ~RecordReader();
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  // The next record into `record`; false (and `record` untouched) at the end
  // of the file. Throws herd::Error naming the file and offset on broken
  // framing; after that, next() throws again.
  bool next(std::vector<uint8_t>* record);
  // The offset of the next record's head.
  uint64_t tell() const;
  // Continues at `offset`, which must be a record's head (checked by the
  // next read).
  void seek(uint64_t offset);
  void reset() { seek(0); }
  const std::string& path() const;
  uint64_t size() const;

 private:
  struct State;
  State* state_;
};

}  // namespace herd::data
