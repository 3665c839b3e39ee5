// The pieces of RecordIO's framing that the writer and both readers share:
// little-endian words, a part's header, and the error every reader throws.
// Internal to data/.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "herd/data/recordio.h"

namespace herd::data::detail {

constexpr std::size_t kPartHeaderSize = 8;
constexpr uint32_t kCflagShift = 29;
constexpr uint32_t kLengthMask = (uint32_t{1} << kCflagShift) - 1;

// cflag values: a whole record, and the first, middle and last part of a
// split one.
constexpr uint32_t kWholeRecord = 0;
constexpr uint32_t kFirstPart = 1;
constexpr uint32_t kMiddlePart = 2;
constexpr uint32_t kLastPart = 3;

inline uint32_t load_le32(const uint8_t* bytes) {
  return uint32_t{bytes[0]} | uint32_t{bytes[1]} << 8 | uint32_t{bytes[2]} << 16 |
         uint32_t{bytes[3]} << 24;
}

inline void store_le32(uint8_t* bytes, uint32_t value) {
  for (int i = 0; i < 4; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
}

// The magic word as it lies on disk.
constexpr uint8_t kMagicBytes[4] = {0x0a, 0x23, 0xd7, 0xce};

inline bool is_magic(const uint8_t* bytes) { return load_le32(bytes) == kRecordMagic; }

// Whether the 8 bytes at `bytes` are a magic word and an lrec with cflag 0
// or 1: how a record's head looks.
inline bool is_head(const uint8_t* bytes) {
  return is_magic(bytes) && (load_le32(bytes + 4) >> kCflagShift) <= kFirstPart;
}

inline uint64_t padded_length(uint64_t length) { return (length + 3) & ~uint64_t{3}; }

struct PartHeader {
  uint32_t cflag = 0;
  uint32_t length = 0;
  // Header, data and padding: where the next part begins, counted from this
  // one's start.
  uint64_t span() const { return kPartHeaderSize + padded_length(length); }
  bool continues() const { return cflag == kFirstPart || cflag == kMiddlePart; }
};

// herd::Error "RecordIO file 'PATH' at byte OFFSET: WHAT".
[[noreturn]] void throw_framing_error(const std::string& path, uint64_t offset,
                                      const std::string& what);

// Checks the part header at `offset` (its 8 bytes at `bytes`) of a file of
// `file_size` bytes and decodes it: the magic word, a cflag that fits where
// the part stands (`previous_cflag` is the cflag of the part before it in
// the same record, or -1 for a record's first part), and data and padding
// that end within the file. Throws herd::Error naming the file and offset.
PartHeader parse_part_header(const uint8_t* bytes, int previous_cflag, const std::string& path,
                             uint64_t offset, uint64_t file_size);

// The error for a part header cut short by the end of the file: `available`
// of its 8 bytes lie before the end.
[[noreturn]] void throw_truncated_header(const std::string& path, uint64_t offset,
                                         uint64_t available, uint64_t file_size);

// Checks that `offset` can be a record's head before anything is read there:
// 4-aligned and within the file (the file's size itself is the end, checked
// by the caller).
void check_head_offset(const std::string& path, uint64_t offset, uint64_t file_size);

// Opens `path` read-only and returns the descriptor and, in `size`, the
// file's size. Throws herd::Error naming the file when it cannot be opened or
// is not a regular file.
int open_for_reading(const std::string& path, uint64_t* size);

// Reads up to `size` bytes at `offset` (retrying short reads) and returns how
// many it read: fewer only at the end of the file. Throws herd::Error naming
// the file and offset when the read fails.
std::size_t read_fully(int fd, void* buffer, std::size_t size, uint64_t offset,
                       const std::string& path);

// A window over a file's bytes, for readers of many small pieces. A piece
// inside the window is copied out of it; a piece of at least `fill` bytes
// is read straight into place; any other piece refills the window with the
// `fill` bytes from its start in one read, so the pieces after it (a part's
// data after its header, the next records) come without a system call.
class ByteWindow {
 public:
  explicit ByteWindow(std::size_t capacity) : bytes_(capacity) {}
  std::size_t capacity() const { return bytes_.size(); }
  // Forgets what the window holds (before reading another file).
  void clear() { length_ = 0; }
  // Copies the bytes [offset, offset + size) of the file `fd` to `into` and
  // returns how many there were: fewer only at the end of the file.
  // 8 <= fill <= capacity(). Throws as read_fully does.
  std::size_t read(int fd, const std::string& path, uint8_t* into, uint64_t offset,
                   std::size_t size, std::size_t fill);

 private:
  std::vector<uint8_t> bytes_;
  uint64_t offset_ = 0;  // the window holds the file's [offset_, offset_ + length_)
  std::size_t length_ = 0;
};

// Reads the record whose head is at `offset` of the file `fd` (`path`,
// `file_size` bytes) through `window` (ByteWindow::read's `fill`): its parts
// checked and joined, escaped magic words restored, into `record`, whose
// capacity is reused. Returns the offset just past it. Throws herd::Error
// naming the file and the offset of the part at fault.
uint64_t read_record(int fd, const std::string& path, uint64_t file_size, uint64_t offset,
                     ByteWindow& window, std::size_t fill, std::vector<uint8_t>* record);

// "0xXXXXXXXX".
std::string hex32(uint32_t value);

}  // namespace herd::data::detail
