// The writer's side of RecordIO (append_record, RecordWriter) and the framing
// checks both readers share (data/framing.h).
#include "herd/data/recordio.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "data/framing.h"
#include "herd/error.h"

namespace herd::data {
namespace detail {

std::string hex32(uint32_t value) {
  static const char kDigits[] = "0123456789abcdef";
  std::string text = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) text += kDigits[(value >> shift) & 0xf];
  return text;
}

void throw_framing_error(const std::string& path, uint64_t offset, const std::string& what) {
  throw Error("RecordIO file '" + path + "' at byte " + std::to_string(offset) + ": " + what);
}

void throw_truncated_header(const std::string& path, uint64_t offset, uint64_t available,
                            uint64_t file_size) {
  if (available == 0) {
    throw_framing_error(path, offset,
                        "truncated: the file (" + std::to_string(file_size) +
                            " bytes) ends inside a split record, before its last part (cflag 3)");
  }
  throw_framing_error(path, offset,
                      "truncated: the file (" + std::to_string(file_size) + " bytes) ends " +
                          std::to_string(available) + " bytes into a part's " +
                          std::to_string(kPartHeaderSize) + "-byte header");
}

void check_head_offset(const std::string& path, uint64_t offset, uint64_t file_size) {
  if (offset > file_size) {
    throw_framing_error(
        path, offset,
        "past the end of the file (" + std::to_string(file_size) + " bytes): no record head there");
  }
  if (offset % 4 != 0) {
    throw_framing_error(path, offset,
                        "not a record head: record heads lie at multiples of 4 bytes");
  }
}

namespace {

const char* cflag_name(uint32_t cflag) {
  switch (cflag) {
    case kWholeRecord: return "0 (a whole record)";
    case kFirstPart: return "1 (the first part of a split record)";
    case kMiddlePart: return "2 (a middle part of a split record)";
    case kLastPart: return "3 (the last part of a split record)";
    default: return "out of range";
  }
}

}  // namespace

PartHeader parse_part_header(const uint8_t* bytes, int previous_cflag, const std::string& path,
                             uint64_t offset, uint64_t file_size) {
  const uint32_t magic = load_le32(bytes);
  if (magic != kRecordMagic) {
    throw_framing_error(path, offset,
                        std::string(previous_cflag < 0 ? "not a record head" : "broken framing") +
                            ": expected the magic word " + hex32(kRecordMagic) + ", found " +
                            hex32(magic));
  }
  const uint32_t lrec = load_le32(bytes + 4);
  PartHeader part;
  part.cflag = lrec >> kCflagShift;
  part.length = lrec & kLengthMask;
  if (previous_cflag < 0) {
    if (part.cflag != kWholeRecord && part.cflag != kFirstPart) {
      throw_framing_error(path, offset,
                          std::string("not a record head: the part there has cflag ") +
                              cflag_name(part.cflag) + ", where a record begins with 0 or 1");
    }
  } else if (part.cflag != kMiddlePart && part.cflag != kLastPart) {
    throw_framing_error(path, offset,
                        std::string("parts out of order: a part with cflag ") +
                            cflag_name(part.cflag) + " follows one with cflag " +
                            cflag_name(static_cast<uint32_t>(previous_cflag)) +
                            ", where a middle (2) or last (3) part belongs");
  }
  // Compared as a subtraction: offset + span cannot overflow a uint64_t for
  // offsets within a file, but the check stays right for any offset.
  if (offset > file_size || part.span() > file_size - offset) {
    throw_framing_error(path, offset,
                        "the part's length " + std::to_string(part.length) + " (" +
                            std::to_string(padded_length(part.length)) +
                            " bytes with padding) runs past the end of the file (" +
                            std::to_string(file_size) + " bytes)");
  }
  return part;
}

}  // namespace detail

namespace {

using detail::kPartHeaderSize;

void append_part(std::vector<uint8_t>* out, uint32_t cflag, const uint8_t* data,
                 std::size_t length) {
  const std::size_t at = out->size();
  out->resize(at + kPartHeaderSize + detail::padded_length(length), 0);
  uint8_t* part = out->data() + at;
  detail::store_le32(part, kRecordMagic);
  detail::store_le32(part + 4, cflag << detail::kCflagShift | static_cast<uint32_t>(length));
  if (length > 0) std::memcpy(part + kPartHeaderSize, data, length);
}

std::string system_error(const std::string& what, const std::string& path, int error) {
  return "RecordIO file '" + path + "': " + what + ": " + std::strerror(error);
}

}  // namespace

uint64_t append_record(std::vector<uint8_t>* out, const void* data, std::size_t size) {
  if (out->size() % 4 != 0) {
    throw Error("RecordIO: a record is appended at byte " + std::to_string(out->size()) +
                    " of the buffer, which is not a multiple of 4",
                ErrorKind::kInvalidArgument);
  }
  if (size > kMaxRecordLength) {
    throw Error("RecordIO: a record of " + std::to_string(size) + " bytes is longer than the " +
                    std::to_string(kMaxRecordLength) + " bytes a part's length field holds",
                ErrorKind::kInvalidArgument);
  }
  const auto* bytes = static_cast<const uint8_t*>(data);
  // Only magic words at 4-aligned offsets of the payload are escaped: those
  // are the ones a reader scanning aligned words could take for a head.
  const std::size_t aligned_end = size & ~std::size_t{3};
  std::size_t part_begin = 0;
  uint64_t escaped = 0;
  for (std::size_t i = 0; i < aligned_end; i += 4) {
    if (!detail::is_magic(bytes + i)) continue;
    append_part(out, escaped == 0 ? detail::kFirstPart : detail::kMiddlePart, bytes + part_begin,
                i - part_begin);
    part_begin = i + 4;
    ++escaped;
  }
  append_part(out, escaped == 0 ? detail::kWholeRecord : detail::kLastPart, bytes + part_begin,
              size - part_begin);
  return escaped;
}

struct RecordWriter::State {
  std::string path;
  int fd = -1;
  // Framed records not yet written; flushed when it passes kFlushSize.
  std::vector<uint8_t> buffer;
  uint64_t written = 0;
  uint64_t escaped = 0;
  // The first write error, which close() reports again.
  std::string failure;

  static constexpr std::size_t kFlushSize = std::size_t{1} << 20;
};

RecordWriter::RecordWriter(const std::string& path) : state_(new State) {
  state_->path = path;
  state_->fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (state_->fd < 0) {
    const int error = errno;
    delete state_;
    throw Error("RecordIO file '" + path + "' cannot be created: " + std::strerror(error));
  }
}

RecordWriter::~RecordWriter() {
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report it; close() does for callers that ask.
  }
  delete state_;
}

uint64_t RecordWriter::write(const void* data, std::size_t size) {
  if (state_->fd < 0) {
    if (!state_->failure.empty()) throw Error(state_->failure);
    throw Error("RecordIO file '" + state_->path + "': written to after close()",
                ErrorKind::kInvalidArgument);
  }
  const uint64_t offset = tell();
  if (size > kMaxRecordLength) {
    throw Error("RecordIO file '" + state_->path + "' at byte " + std::to_string(offset) +
                    ": a record of " + std::to_string(size) + " bytes is longer than the " +
                    std::to_string(kMaxRecordLength) + " bytes a part's length field holds",
                ErrorKind::kInvalidArgument);
  }
  state_->escaped += append_record(&state_->buffer, data, size);
  if (state_->buffer.size() >= State::kFlushSize) flush();
  return offset;
}

uint64_t RecordWriter::tell() const { return state_->written + state_->buffer.size(); }

uint64_t RecordWriter::escaped_magic_count() const { return state_->escaped; }

void RecordWriter::flush() {
  if (state_->fd < 0) return;
  const uint8_t* next = state_->buffer.data();
  std::size_t left = state_->buffer.size();
  while (left > 0) {
    const ssize_t n = ::write(state_->fd, next, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int error = n < 0 ? errno : EIO;
      // Nothing more can be written at the right offsets: the file is shut.
      ::close(state_->fd);
      state_->fd = -1;
      state_->failure = system_error("writing " + std::to_string(left) + " bytes at byte " +
                                         std::to_string(state_->written) + " failed",
                                     state_->path, error);
      throw Error(state_->failure);
    }
    next += n;
    left -= static_cast<std::size_t>(n);
    state_->written += static_cast<uint64_t>(n);
  }
  state_->buffer.clear();
}

void RecordWriter::close() {
  if (state_->fd < 0) {
    if (!state_->failure.empty()) throw Error(state_->failure);
    return;
  }
  flush();
  const int fd = state_->fd;
  state_->fd = -1;
  if (::close(fd) != 0) throw Error(system_error("closing failed", state_->path, errno));
}

const std::string& RecordWriter::path() const { return state_->path; }

}  // namespace herd::data
