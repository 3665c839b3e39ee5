// RecordReader: one .rec file's records in order, read through a window a few
// hundred KiB long (detail::ByteWindow). Parts that lie in the window are
// copied out of it; a part longer than the window is read straight into the
// record.
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
  // Sized when the file is opened: no larger than the file.
  detail::ByteWindow window{0};
  // The message of the error next() threw, thrown again until seek().
  std::string failure;
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
  state_->window = detail::ByteWindow(static_cast<std::size_t>(
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
    s.position = detail::read_record(s.fd, s.path, s.size, s.position, s.window,
                                     s.window.capacity(), record);
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
