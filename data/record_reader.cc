// RecordReader: one .rec file's records in order, read through a buffer a few
// hundred KiB long. Parts that lie in the buffer are copied out of it; a part
// longer than the buffer is read straight into the record.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "data/framing.h"
#include "herd/data/recordio.h"
#include "herd/error.h"

namespace herd::data {
namespace {

using detail::kPartHeaderSize;

// Large enough that a read() costs little per byte, small enough to stay in
// the L2 cache, from which the copy into the record is quick.
constexpr std::size_t kBufferSize = std::size_t{256} << 10;

}  // namespace

struct RecordReader::State {
  std::string path;
  int fd = -1;
  uint64_t size = 0;
  // The next record's head, and the offset at or after which no record is
  // read.
  uint64_t position = 0;
  uint64_t end = std::numeric_limits<uint64_t>::max();
  // The file's bytes [buffer_offset, buffer_offset + buffer_length).
  std::vector<uint8_t> buffer;
  uint64_t buffer_offset = 0;
  std::size_t buffer_length = 0;
  // The message of the error next() threw, thrown again until seek().
  std::string failure;

  // Copies the file's bytes [offset, offset + size) to `into` and returns
  // how many there were: fewer only at the end of the file.
  std::size_t read(uint8_t* into, uint64_t offset, std::size_t size) {
    std::size_t done = 0;
    while (done < size) {
      const uint64_t at = offset + done;
      if (at >= buffer_offset && at - buffer_offset < buffer_length) {
        const std::size_t from = static_cast<std::size_t>(at - buffer_offset);
        const std::size_t n = std::min(size - done, buffer_length - from);
        std::memcpy(into + done, buffer.data() + from, n);
        done += n;
        continue;
      }
      if (size - done >= buffer.size()) {
        return done + detail::read_fully(fd, into + done, size - done, at, path);
      }
      buffer_offset = at;
      buffer_length = detail::read_fully(fd, buffer.data(), buffer.size(), at, path);
      if (buffer_length == 0) return done;
    }
    return done;
  }

  // The record at `position` into `record`; returns the offset after it.
  uint64_t read_record(std::vector<uint8_t>* record) {
    detail::check_head_offset(path, position, size);
    uint64_t offset = position;
    int previous_cflag = -1;
    for (;;) {
      uint8_t header[kPartHeaderSize];
      const uint64_t available = std::min<uint64_t>(size - offset, kPartHeaderSize);
      if (read(header, offset, static_cast<std::size_t>(available)) < kPartHeaderSize) {
        detail::throw_truncated_header(path, offset, available, size);
      }
      const detail::PartHeader part =
          detail::parse_part_header(header, previous_cflag, path, offset, size);
      // Resized from the previous record's size: equal sizes zero nothing.
      const std::size_t at = previous_cflag < 0 ? 0 : record->size();
      record->resize(at + part.length);
      if (read(record->data() + at, offset + kPartHeaderSize, part.length) < part.length) {
        detail::throw_framing_error(path, offset,
                                    "truncated: the file ended while the part was read (it "
                                    "shrank after it was opened)");
      }
      offset += part.span();
      if (!part.continues()) return offset;
      record->insert(record->end(), std::begin(detail::kMagicBytes), std::end(detail::kMagicBytes));
      previous_cflag = static_cast<int>(part.cflag);
    }
  }
};

RecordReader::RecordReader(const std::string& path) : state_(new State) {
  state_->path = path;
  try {
    state_->fd = detail::open_for_reading(path, &state_->size);
  } catch (...) {
    delete state_;
    throw;
  }
  // The kernel's read-ahead grows for a file read front to back.
  ::posix_fadvise(state_->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  // No larger than the file: opening a small file stays cheap.
  state_->buffer.resize(static_cast<std::size_t>(
      std::max<uint64_t>(std::min<uint64_t>(state_->size, kBufferSize), kPartHeaderSize)));
}

RecordReader::RecordReader(const std::string& path, uint64_t begin, uint64_t end)
    : RecordReader(path) {
  state_->position = begin;
  state_->end = end;
}

RecordReader::~RecordReader() {
  if (state_->fd >= 0) ::close(state_->fd);
  delete state_;
}

bool RecordReader::next(std::vector<uint8_t>* record) {
  State& s = *state_;
  if (!s.failure.empty()) throw Error(s.failure);
  if (s.position >= s.end || s.position == s.size) return false;
  try {
    s.position = s.read_record(record);
  } catch (const Error& error) {
    s.failure = error.what();
    throw;
  }
  return true;
}

uint64_t RecordReader::tell() const { return state_->position; }

void RecordReader::seek(uint64_t offset) {
  state_->position = offset;
  state_->failure.clear();
}

const std::string& RecordReader::path() const { return state_->path; }

uint64_t RecordReader::size() const { return state_->size; }

}  // namespace herd::data
