#include "herd/data/idx_file.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <sstream>
#include <utility>

#include <sys/stat.h>

#include "herd/error.h"

namespace herd::data {
namespace {

constexpr uint8_t kUnsignedByteType = 0x08;
constexpr unsigned kReadChunkBytes = 1u << 20;

[[noreturn]] void fail(const std::string& name, const std::string& what) {
  throw herd::Error("IDX file " + name + ": " + what);
}

uint32_t read_be32(const std::vector<uint8_t>& bytes, std::size_t offset) {
  return (uint32_t{bytes[offset]} << 24) | (uint32_t{bytes[offset + 1]} << 16) |
         (uint32_t{bytes[offset + 2]} << 8) | uint32_t{bytes[offset + 3]};
}

std::string magic_text(uint32_t magic) {
  std::ostringstream text;
  text << magic << " (0x" << std::hex << magic << ")";
  return text.str();
}

const char* plural(uint64_t count, const char* one, const char* many) {
  return count == 1 ? one : many;
}

// The magic word says the type (byte 2) and the number of dimensions (byte
// 3); its first two bytes are zero. Returns the number of dimensions.
int check_magic(const std::vector<uint8_t>& bytes, const std::string& name, int dimensions) {
  if (bytes.size() < 4) {
    std::ostringstream message;
    message << "is " << bytes.size() << " bytes, shorter than an IDX file's 4-byte magic number";
    fail(name, message.str());
  }
  const uint32_t magic = read_be32(bytes, 0);
  if (dimensions > 0) {
    const uint32_t expected = (uint32_t{kUnsignedByteType} << 8) | uint32_t(dimensions);
    if (magic != expected) {
      std::ostringstream message;
      message << "magic number is " << magic_text(magic) << ", expected " << magic_text(expected)
              << ": unsigned bytes in " << dimensions
              << plural(dimensions, " dimension", " dimensions");
      fail(name, message.str());
    }
    return dimensions;
  }
  if ((magic >> 16) != 0 || ((magic >> 8) & 0xff) != kUnsignedByteType || (magic & 0xff) == 0) {
    fail(name, "magic number is " + magic_text(magic) +
                   ", not that of an IDX file of unsigned bytes (0x000008NN, NN >= 1 the number "
                   "of dimensions)");
  }
  return int(magic & 0xff);
}

// Header + data must be exactly the file: a shorter file is truncated, a
// longer one is not what the header describes.
void check_size(const std::vector<uint8_t>& bytes, const std::string& name, uint64_t header_bytes,
                uint64_t data_bytes) {
  const uint64_t expected = header_bytes + data_bytes;
  if (bytes.size() != expected) {
    std::ostringstream message;
    message << "is " << bytes.size() << " bytes, but its header describes " << expected << " ("
            << header_bytes << " header + " << data_bytes << " data)"
            << (bytes.size() < expected ? ": the file is truncated" : "");
    fail(name, message.str());
  }
}

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};

// The size the content will have, as a capacity to reserve so that the bytes
// are written once rather than copied at every growth: a gzip file's ISIZE
// trailer (its last 4 bytes, the size modulo 2^32, little-endian), bounded by
// deflate's largest ratio; else the file's own size. A hint only: 0 when the
// file cannot be read here, and a wrong one costs nothing but copies.
std::size_t expected_content_bytes(const std::string& path, const struct stat& info) {
  const auto file_bytes = static_cast<uint64_t>(info.st_size);
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file || file_bytes < 18) return static_cast<std::size_t>(file_bytes);
  uint8_t magic[2];
  if (std::fread(magic, 1, 2, file.get()) != 2) return 0;
  if (magic[0] != 0x1f || magic[1] != 0x8b) return static_cast<std::size_t>(file_bytes);
  uint8_t trailer[4];
  if (std::fseek(file.get(), -4, SEEK_END) != 0 || std::fread(trailer, 1, 4, file.get()) != 4) {
    return 0;
  }
  const uint64_t declared = uint64_t{trailer[0]} | (uint64_t{trailer[1]} << 8) |
                            (uint64_t{trailer[2]} << 16) | (uint64_t{trailer[3]} << 24);
  constexpr uint64_t kMaxDeflateRatio = 1032;
  return static_cast<std::size_t>(std::min(declared, file_bytes * kMaxDeflateRatio));
}

}  // namespace

std::vector<uint8_t> read_idx_bytes(const std::string& path) {
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    throw herd::Error("IDX file " + path +
                      (errno == ENOENT
                           ? std::string(" does not exist")
                           : std::string(" cannot be opened: ") + std::strerror(errno)));
  }
  if (S_ISDIR(info.st_mode)) throw herd::Error("IDX file " + path + " is a directory, not a file");
  errno = 0;
  std::unique_ptr<gzFile_s, GzCloser> file(gzopen(path.c_str(), "rb"));
  if (!file) {
    throw herd::Error("IDX file " + path +
                      " cannot be opened: " + (errno ? std::strerror(errno) : "out of memory"));
  }
  // gzread passes a file that is not gzip-compressed through unchanged.
  std::vector<uint8_t> bytes;
  // One chunk beyond the content, for the read that finds its end.
  bytes.reserve(expected_content_bytes(path, info) + kReadChunkBytes);
  for (;;) {
    const std::size_t old_size = bytes.size();
    bytes.resize(old_size + kReadChunkBytes);
    const int got = gzread(file.get(), bytes.data() + old_size, kReadChunkBytes);
    if (got < 0) {
      bytes.resize(old_size);
      break;
    }
    bytes.resize(old_size + static_cast<std::size_t>(got));
    if (got == 0) break;
  }
  int code = Z_OK;
  const char* message = gzerror(file.get(), &code);
  if (code != Z_OK && code != Z_STREAM_END) {
    throw herd::Error("IDX file " + path +
                      " cannot be read: " + (code == Z_ERRNO ? std::strerror(errno) : message) +
                      " (a corrupt or truncated gzip file?)");
  }
  return bytes;
}

IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& name, int dimensions) {
  if (dimensions < 0 || dimensions > 0xff) {
    fail(name, "cannot have " + std::to_string(dimensions) + " dimensions (1..255)");
  }
  const int found = check_magic(bytes, name, dimensions);
  const uint64_t header_bytes = 4 + 4 * uint64_t(found);
  if (bytes.size() < header_bytes) {
    std::ostringstream message;
    message << "is " << bytes.size() << " bytes, shorter than the " << header_bytes
            << "-byte header of an IDX file with " << found
            << plural(found, " dimension", " dimensions");
    fail(name, message.str());
  }
  IdxArray array;
  array.dims.resize(found);
  bool empty = false;
  for (int d = 0; d < found; ++d) {
    array.dims[d] = read_be32(bytes, 4 + 4 * std::size_t(d));
    empty = empty || array.dims[d] == 0;
  }
  // A dimension of 0 makes the product 0, however large the others; else the
  // product must leave room for the header in a 64-bit size.
  uint64_t data_bytes = empty ? 0 : 1;
  const uint64_t limit = uint64_t(std::numeric_limits<int64_t>::max()) - header_bytes;
  for (int d = 0; d < found && !empty; ++d) {
    if (data_bytes > limit / array.dims[d])
      fail(name, "the header's dimensions overflow a 64-bit size");
    data_bytes *= array.dims[d];
  }
  check_size(bytes, name, header_bytes, data_bytes);
  // The payload stays where it was read: the header moves out, not the data.
  bytes.erase(bytes.begin(), bytes.begin() + std::ptrdiff_t(header_bytes));
  array.data = std::move(bytes);
  return array;
}

IdxArray read_idx_file(const std::string& path, int dimensions) {
  return parse_idx(read_idx_bytes(path), path, dimensions);
}

}  // namespace herd::data
