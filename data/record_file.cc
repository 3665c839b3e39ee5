// RecordFile: a .rec file read at any offset with pread, so that several
// threads share one descriptor and no read depends on another's position.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "data/framing.h"
#include "herd/data/recordio.h"
#include "herd/error.h"

namespace herd::data {
namespace detail {

int open_for_reading(const std::string& path, uint64_t* size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error("RecordIO file '" + path + "' cannot be opened: " + std::strerror(errno));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw Error("RecordIO file '" + path + "' cannot be read: " + std::strerror(error));
  }
  if (!S_ISREG(info.st_mode)) {
    ::close(fd);
    throw Error("RecordIO file '" + path + "' cannot be read: not a regular file");
  }
  *size = static_cast<uint64_t>(info.st_size);
  return fd;
}

std::size_t read_fully(int fd, void* buffer, std::size_t size, uint64_t offset,
                       const std::string& path) {
  auto* into = static_cast<uint8_t*>(buffer);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, into + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      throw_framing_error(
          path, offset + done,
          "reading " + std::to_string(size - done) + " bytes failed: " + std::strerror(errno));
    }
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  return done;
}

std::size_t ByteWindow::read(int fd, const std::string& path, uint8_t* into, uint64_t offset,
                             std::size_t size, std::size_t fill) {
  std::size_t done = 0;
  while (done < size) {
    const uint64_t at = offset + done;
    if (at >= offset_ && at - offset_ < length_) {
      const std::size_t from = static_cast<std::size_t>(at - offset_);
      const std::size_t n = std::min(size - done, length_ - from);
      std::memcpy(into + done, bytes_.data() + from, n);
      done += n;
      continue;
    }
    if (size - done >= fill) return done + read_fully(fd, into + done, size - done, at, path);
    offset_ = at;
    length_ = read_fully(fd, bytes_.data(), fill, at, path);
    if (length_ == 0) return done;
  }
  return done;
}

uint64_t read_record(int fd, const std::string& path, uint64_t file_size, uint64_t offset,
                     ByteWindow& window, std::size_t fill, std::vector<uint8_t>* record) {
  check_head_offset(path, offset, file_size);
  uint64_t position = offset;
  int previous_cflag = -1;
  for (;;) {
    uint8_t header[kPartHeaderSize];
    const uint64_t available = std::min<uint64_t>(file_size - position, kPartHeaderSize);
    if (window.read(fd, path, header, position, static_cast<std::size_t>(available), fill) <
        kPartHeaderSize) {
      throw_truncated_header(path, position, available, file_size);
    }
    const PartHeader part = parse_part_header(header, previous_cflag, path, position, file_size);
    // A first part resizes the vector from what it held: no bytes are zeroed
    // when it held a record at least as long.
    const std::size_t at = previous_cflag < 0 ? 0 : record->size();
    record->resize(at + part.length);
    if (window.read(fd, path, record->data() + at, position + kPartHeaderSize, part.length, fill) <
        part.length) {
      throw_framing_error(path, position,
                          "truncated: the file ended while the part was read (it shrank after "
                          "it was opened)");
    }
    position += part.span();
    if (!part.continues()) return position;
    record->insert(record->end(), std::begin(kMagicBytes), std::end(kMagicBytes));
    previous_cflag = static_cast<int>(part.cflag);
  }
}

}  // namespace detail

namespace {

using detail::kPartHeaderSize;

// seek_record_head reads this many bytes at a time.
constexpr std::size_t kScanChunk = std::size_t{64} << 10;
// read_at reads a record of up to this many bytes with its header in one
// call; without a hint it expects kDefaultSpan.
constexpr std::size_t kMaxWindow = std::size_t{64} << 10;
constexpr std::size_t kDefaultSpan = 1024;

// The window read_at reads through: one per thread, as RecordFile's
// readers are concurrent, and not on the stack, which would make each call
// touch 64 KiB of it.
detail::ByteWindow& read_window() {
  thread_local detail::ByteWindow window(kMaxWindow);
  return window;
}

}  // namespace

RecordFile::RecordFile(const std::string& path) : path_(path) {
  fd_ = detail::open_for_reading(path, &size_);
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) ::close(fd_);
}

RecordFile::RecordFile(RecordFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(std::exchange(other.fd_, -1)), size_(other.size_) {}

RecordFile& RecordFile::operator=(RecordFile&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    fd_ = std::exchange(other.fd_, -1);
    size_ = other.size_;
  }
  return *this;
}

uint64_t RecordFile::read_at(uint64_t offset, std::vector<uint8_t>* record) const {
  return read_at(offset, record, kDefaultSpan);
}

uint64_t RecordFile::read_at(uint64_t offset, std::vector<uint8_t>* record,
                             uint64_t expected_span) const {
  detail::check_head_offset(path_, offset, size_);
  if (offset == size_) {
    detail::throw_framing_error(
        path_, offset,
        "the end of the file: no record head there (file size " + std::to_string(size_) + ")");
  }
  // A small record comes with its header in one pread when the caller knows
  // its span: random reads of small records are bound by the system calls.
  // A large one's data is read straight into the record after its header,
  // as copying it through the window would cost more than the call saved.
  detail::ByteWindow& window = read_window();
  window.clear();  // it may hold another file's bytes
  const std::size_t fill = static_cast<std::size_t>(std::clamp<uint64_t>(
      expected_span <= kMaxWindow ? expected_span : 0, kPartHeaderSize, kMaxWindow));
  return detail::read_record(fd_, path_, size_, offset, window, fill, record);
}

bool RecordFile::is_record_head(uint64_t offset) const {
  if (offset % 4 != 0 || offset > size_ || size_ - offset < kPartHeaderSize) return false;
  uint8_t header[kPartHeaderSize];
  if (detail::read_fully(fd_, header, kPartHeaderSize, offset, path_) < kPartHeaderSize) {
    return false;
  }
  return detail::is_head(header);
}

uint64_t RecordFile::seek_record_head(uint64_t offset) const {
  if (offset >= size_) return size_;
  uint64_t position = (offset + 3) & ~uint64_t{3};
  std::vector<uint8_t> chunk(kScanChunk);
  // A head is a magic word and the lrec after it: each chunk is checked at
  // the aligned words whose lrec it also holds, and the next chunk starts at
  // the first word left unchecked.
  while (position <= size_ && size_ - position >= kPartHeaderSize) {
    const std::size_t length =
        static_cast<std::size_t>(std::min<uint64_t>(size_ - position, kScanChunk));
    const std::size_t read = detail::read_fully(fd_, chunk.data(), length, position, path_);
    if (read < kPartHeaderSize) break;
    std::size_t i = 0;
    for (; i + kPartHeaderSize <= read; i += 4) {
      if (detail::is_head(chunk.data() + i)) return position + i;
    }
    position += i;
  }
  return size_;
}

}  // namespace herd::data
