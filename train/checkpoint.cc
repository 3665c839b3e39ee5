// Checkpoint files (include/herd/train/checkpoint.h): serialization into one
// little-endian buffer, CRC-32, the atomic write and the checked read.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "common/byte_codec.h"
#include "herd/error.h"
#include "herd/herd.h"
#include "herd/train/checkpoint.h"

namespace herd {
namespace {

constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'C', 'K', 'P', 'T'};
constexpr std::size_t kHeaderSize = 24;         // magic 8, version 4, crc 4, payload size 8
constexpr std::size_t kSectionHeaderSize = 12;  // tag 4, length 8

using Tag = std::array<char, 4>;
constexpr Tag kSchedule = {'S', 'C', 'H', 'D'};
constexpr Tag kMetadata = {'M', 'E', 'T', 'A'};
constexpr Tag kParameters = {'P', 'A', 'R', 'M'};
constexpr Tag kOptimizer = {'O', 'P', 'T', 'S'};

std::string tag_text(const Tag& tag) {
  std::string text;
  for (char c : tag) {
    const auto u = static_cast<unsigned char>(c);
    text += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : fmt::format("\\x{:02x}", u);
  }
  return text;
}

std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t n = 0; n < 256; ++n) {
    uint32_t c = n;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    table[n] = c;
  }
  return table;
}

// ---- writing ---------------------------------------------------------------

// The checkpoint's fields over the common byte encoding
// (common/byte_codec.h), with its limits reported as herd::Error.
class Writer : public detail::ByteWriter {
 public:
  void string(const std::string& s, const std::string& what) {
    if (s.size() > UINT32_MAX) {
      throw Error(fmt::format("{} is {} bytes long; a checkpoint holds at most {}", what, s.size(),
                              UINT32_MAX));
    }
    ByteWriter::string(s);
  }
  void floats(const std::vector<float>& values) {
    u64(values.size());
    f32s(values.data(), values.size());
  }
  void count(std::size_t n, const std::string& what) {
    if (n > UINT32_MAX) {
      throw Error(
          fmt::format("{}: {} entries; a checkpoint holds at most {}", what, n, UINT32_MAX));
    }
    u32(static_cast<uint32_t>(n));
  }
  // Starts a section; end_section() fills in its length.
  void begin_section(const Tag& tag) {
    bytes(tag.data(), tag.size());
    section_start_ = size();
    u64(0);
  }
  void end_section() { patch_u64(section_start_, size() - section_start_ - 8); }

 private:
  std::size_t section_start_ = 0;
};

std::vector<unsigned char> serialize(const Checkpoint& ck) {
  std::unordered_set<std::string> names;
  for (const CheckpointParameter& p : ck.parameters) {
    if (!names.insert(p.name).second) {
      throw Error(fmt::format("checkpoint: parameter '{}' is given twice", p.name));
    }
  }
  names.clear();
  for (const StateBuffer& b : ck.optimizer.buffers) {
    if (!names.insert(b.name).second) {
      throw Error(fmt::format("checkpoint: optimizer buffer '{}' is given twice", b.name));
    }
  }

  Writer w;
  w.bytes(kMagic, sizeof kMagic);
  w.u32(kCheckpointVersion);
  w.u32(0);  // crc32, filled in below
  w.u64(0);  // payload size, filled in below

  w.begin_section(kSchedule);
  w.i64(ck.step);
  w.i64(ck.epoch);
  w.f64(ck.position);
  w.u64(ck.seed);
  if (ck.ranks < 1) {
    throw Error(fmt::format("checkpoint: ranks is {}; a run has at least 1 rank", ck.ranks));
  }
  w.u32(static_cast<uint32_t>(ck.ranks));
  w.end_section();

  w.begin_section(kMetadata);
  w.count(ck.metadata.size(), "checkpoint metadata");
  for (const auto& [key, value] : ck.metadata) {
    w.string(key, "checkpoint metadata key");
    w.string(value, fmt::format("checkpoint metadata '{}'", key));
  }
  w.end_section();

  w.begin_section(kParameters);
  w.count(ck.parameters.size(), "checkpoint parameters");
  for (const CheckpointParameter& p : ck.parameters) {
    w.string(p.name, "checkpoint parameter name");
    w.floats(p.values);
  }
  w.end_section();

  w.begin_section(kOptimizer);
  w.i64(ck.optimizer.step);
  w.count(ck.optimizer.buffers.size(), "checkpoint optimizer buffers");
  for (const StateBuffer& b : ck.optimizer.buffers) {
    w.string(b.name, "checkpoint optimizer buffer name");
    w.floats(b.values);
  }
  w.end_section();

  const uint64_t payload_size = w.size() - kHeaderSize;
  w.patch_u32(12, crc32(w.data().data() + kHeaderSize, payload_size));
  w.patch_u64(16, payload_size);
  return w.take();
}

// ---- reading ---------------------------------------------------------------

// Reads one section; any read past its end is an inconsistent length and
// throws naming the file, the section, the field and its byte offset in the
// file.
class Reader {
 public:
  Reader(const std::string& path, const std::string& section, const unsigned char* begin,
         std::size_t length, uint64_t file_offset)
      : path_(path), section_(section), file_offset_(file_offset), in_(begin, length, section) {}

  std::size_t remaining() const { return in_.remaining(); }
  // Where the next read starts, counted from the start of the file.
  uint64_t offset() const { return file_offset_ + in_.position(); }
  void need(uint64_t n, const std::string& what) const {
    if (n > remaining()) {
      throw Error(fmt::format(
          "checkpoint '{}' is inconsistent: section {} at byte {} of the file needs {} more "
          "bytes for {}, but only {} remain in the section",
          path_, section_, offset(), n, what, remaining()));
    }
  }
  uint32_t u32(const std::string& what) {
    need(4, what);
    return in_.u32();
  }
  uint64_t u64(const std::string& what) {
    need(8, what);
    return in_.u64();
  }
  int64_t i64(const std::string& what) { return static_cast<int64_t>(u64(what)); }
  double f64(const std::string& what) {
    need(8, what);
    return in_.f64();
  }
  std::string string(const std::string& what) {
    const uint32_t size = u32(what + " length");
    need(size, what);
    const unsigned char* bytes = in_.range(size);
    return std::string(reinterpret_cast<const char*>(bytes), size);
  }
  std::vector<float> floats(const std::string& what) {
    const uint64_t count = u64(what + " element count");
    if (count > remaining() / 4) {
      throw Error(fmt::format(
          "checkpoint '{}' is inconsistent: {} has {} elements of 4 bytes, but only {} bytes "
          "remain in section {} at byte {} of the file",
          path_, what, count, remaining(), section_, offset()));
    }
    return in_.f32s(count);
  }
  // Every byte of the section must have been read.
  void finish() const {
    if (remaining() != 0) {
      throw Error(fmt::format(
          "checkpoint '{}' is inconsistent: section {} is {} bytes long, but its contents end "
          "after {} bytes, at byte {} of the file",
          path_, section_, in_.position() + remaining(), in_.position(), offset()));
    }
  }

 private:
  const std::string& path_;
  std::string section_;
  uint64_t file_offset_;
  detail::ByteReader in_;
};

void check_unique(std::unordered_set<std::string>& seen, const std::string& name,
                  const std::string& path, const std::string& what) {
  if (!seen.insert(name).second) {
    throw Error(
        fmt::format("checkpoint '{}' is inconsistent: {} '{}' appears twice", path, what, name));
  }
}

Checkpoint parse(const std::string& path, const std::vector<unsigned char>& file) {
  const std::size_t size = file.size();
  if (size >= sizeof kMagic && std::memcmp(file.data(), kMagic, sizeof kMagic) != 0) {
    std::string found;
    for (std::size_t i = 0; i < sizeof kMagic; ++i) found += fmt::format("{:02x}", file[i]);
    throw Error(fmt::format(
        "'{}' is not a herd checkpoint: wrong magic bytes (expected \"HERDCKPT\", found {} in hex)",
        path, found));
  }
  if (size < kHeaderSize) {
    throw Error(
        fmt::format("checkpoint '{}' is truncated: {} bytes, shorter than the {}-byte header", path,
                    size, kHeaderSize));
  }
  // The header's length was checked above, so none of its reads fails.
  detail::ByteReader header(file.data(), kHeaderSize, "header");
  (void)header.range(sizeof kMagic);
  const uint32_t version = header.u32();
  if (version != kCheckpointVersion) {
    throw Error(fmt::format(
        "checkpoint '{}' has unsupported format version {} (this build reads version {})", path,
        version, kCheckpointVersion));
  }
  const uint32_t stored_crc = header.u32();
  const uint64_t payload_size = header.u64();
  const uint64_t actual_payload = size - kHeaderSize;
  if (actual_payload < payload_size) {
    throw Error(fmt::format(
        "checkpoint '{}' is truncated: expected {} bytes ({}-byte header + {}-byte payload), "
        "found {}",
        path, kHeaderSize + payload_size, kHeaderSize, payload_size, size));
  }
  if (actual_payload > payload_size) {
    throw Error(fmt::format(
        "checkpoint '{}' is inconsistent: expected {} bytes ({}-byte header + {}-byte payload), "
        "found {} (trailing bytes)",
        path, kHeaderSize + payload_size, kHeaderSize, payload_size, size));
  }
  const unsigned char* payload = file.data() + kHeaderSize;
  const uint32_t crc = crc32(payload, payload_size);
  if (crc != stored_crc) {
    throw Error(fmt::format(
        "checkpoint '{}' is corrupt: payload checksum mismatch (expected CRC-32 {:08x}, found "
        "{:08x})",
        path, stored_crc, crc));
  }

  Checkpoint ck;
  std::unordered_set<std::string> sections;
  // Every read below is checked against what remains first, with its own
  // message, so `sections_in` never fails.
  detail::ByteReader sections_in(payload, payload_size, "payload");
  while (sections_in.remaining() > 0) {
    const uint64_t offset = kHeaderSize + sections_in.position();
    if (sections_in.remaining() < kSectionHeaderSize) {
      throw Error(fmt::format(
          "checkpoint '{}' is inconsistent: a section header at byte {} needs {} bytes, but only "
          "{} remain",
          path, offset, kSectionHeaderSize, sections_in.remaining()));
    }
    Tag tag;
    sections_in.bytes(tag.data(), tag.size());
    const uint64_t length = sections_in.u64();
    const std::string name = tag_text(tag);
    if (length > sections_in.remaining()) {
      throw Error(fmt::format(
          "checkpoint '{}' is inconsistent: section {} at byte {} is {} bytes long, but only {} "
          "bytes remain in the file",
          path, name, offset, length, sections_in.remaining()));
    }
    if (!sections.insert(name).second) {
      throw Error(
          fmt::format("checkpoint '{}' is inconsistent: section {} appears twice", path, name));
    }
    Reader r(path, name, sections_in.range(length), length, offset + kSectionHeaderSize);
    std::unordered_set<std::string> seen;
    if (tag == kSchedule) {
      ck.step = r.i64("step");
      ck.epoch = r.i64("epoch");
      ck.position = r.f64("position");
      ck.seed = r.u64("seed");
      const uint64_t ranks_at = r.offset();
      const uint32_t ranks = r.u32("ranks");
      if (ranks == 0 || ranks > static_cast<uint32_t>(std::numeric_limits<int>::max())) {
        throw Error(fmt::format(
            "checkpoint '{}' is inconsistent: section SCHD at byte {} of the file gives {} "
            "ranks (expected 1 to {})",
            path, ranks_at, ranks, std::numeric_limits<int>::max()));
      }
      ck.ranks = static_cast<int>(ranks);
    } else if (tag == kMetadata) {
      const uint32_t count = r.u32("metadata count");
      for (uint32_t i = 0; i < count; ++i) {
        std::string key = r.string("metadata key");
        check_unique(seen, key, path, "metadata key");
        ck.metadata[key] = r.string(fmt::format("metadata '{}'", key));
      }
    } else if (tag == kParameters) {
      const uint32_t count = r.u32("parameter count");
      for (uint32_t i = 0; i < count; ++i) {
        CheckpointParameter p;
        p.name = r.string("parameter name");
        check_unique(seen, p.name, path, "parameter");
        p.values = r.floats(fmt::format("parameter '{}'", p.name));
        ck.parameters.push_back(std::move(p));
      }
    } else if (tag == kOptimizer) {
      ck.optimizer.step = r.i64("optimizer step");
      const uint32_t count = r.u32("optimizer buffer count");
      for (uint32_t i = 0; i < count; ++i) {
        StateBuffer b;
        b.name = r.string("optimizer buffer name");
        check_unique(seen, b.name, path, "optimizer buffer");
        b.values = r.floats(fmt::format("optimizer buffer '{}'", b.name));
        ck.optimizer.buffers.push_back(std::move(b));
      }
    } else {
      throw Error(fmt::format(
          "checkpoint '{}' is inconsistent: unknown section {} at byte {} (version {} has "
          "SCHD, META, PARM and OPTS)",
          path, name, offset, kCheckpointVersion));
    }
    r.finish();
  }
  for (const Tag& tag : {kSchedule, kMetadata, kParameters, kOptimizer}) {
    if (sections.count(tag_text(tag)) == 0) {
      throw Error(fmt::format("checkpoint '{}' is inconsistent: section {} is missing", path,
                              tag_text(tag)));
    }
  }
  return ck;
}

// The ranks of this run: herd's job size, or 1 for a single process that has
// not started herd.
int running_ranks() { return is_initialized() ? size() : 1; }

std::string errno_text(int err) { return fmt::format("{} (errno {})", std::strerror(err), err); }

// Closes fd (if open) and removes the temporary file; keeps errno.
void discard(int fd, const std::string& tmp) {
  const int saved = errno;
  if (fd >= 0) ::close(fd);
  ::unlink(tmp.c_str());
  errno = saved;
}

}  // namespace

uint32_t crc32(const void* data, std::size_t size, uint32_t crc) {
  static const std::array<uint32_t, 256> table = make_crc_table();
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

void save_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  const std::vector<unsigned char> bytes = serialize(checkpoint);
  // The temporary file sits next to `path` so that rename() stays within one
  // file system and is atomic: readers see the old file or the new one.
  const std::string tmp = fmt::format("{}.tmp.{}", path, static_cast<long>(::getpid()));
  auto fail = [&](const char* what, int fd) {
    const int err = errno;
    discard(fd, tmp);
    throw Error(fmt::format("cannot write checkpoint '{}': {} '{}' failed: {}", path, what, tmp,
                            errno_text(err)));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("creating", -1);
  std::size_t written = 0;
  while (written < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("writing", fd);
    }
    written += static_cast<std::size_t>(n);
  }
  // fsync before rename: otherwise a crash soon after could leave `path`
  // renamed to a file whose data never reached the disk (empty or torn).
  if (::fsync(fd) != 0) fail("fsync of", fd);
  if (::close(fd) != 0) fail("closing", -1);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    throw Error(fmt::format("cannot write checkpoint '{}': renaming '{}' over it failed: {}", path,
                            tmp, errno_text(err)));
  }
  // Best effort: fsync the directory so the rename itself survives a crash.
  // The new checkpoint is complete at `path` already; some file systems
  // refuse fsync on a directory, which is not an error worth failing for.
  const std::size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

Checkpoint load_checkpoint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    throw Error(fmt::format("cannot read checkpoint '{}': {}", path, errno_text(err)));
  }
  std::vector<unsigned char> file;
  struct stat st;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) file.reserve(static_cast<std::size_t>(st.st_size));
  unsigned char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw Error(fmt::format("cannot read checkpoint '{}': {}", path, errno_text(err)));
    }
    if (n == 0) break;
    file.insert(file.end(), buffer, buffer + n);
  }
  ::close(fd);
  return parse(path, file);
}

Checkpoint make_checkpoint(const std::vector<Parameter>& params, const Optimizer& optimizer,
                           int64_t step, int64_t epoch, uint64_t seed) {
  Checkpoint ck;
  std::unordered_set<std::string> names;
  for (const Parameter& p : params) {
    if (!names.insert(p.name()).second) {
      throw Error(fmt::format("make_checkpoint: parameter '{}' is given twice", p.name()));
    }
    ck.parameters.push_back({p.name(), std::vector<float>(p.value(), p.value() + p.size())});
  }
  ck.optimizer = optimizer.export_state();
  ck.step = step;
  ck.epoch = epoch;
  ck.position = static_cast<double>(epoch);
  ck.seed = seed;
  ck.ranks = running_ranks();
  return ck;
}

void apply_checkpoint(const Checkpoint& checkpoint, const std::vector<Parameter>& params,
                      Optimizer& optimizer) {
  const int ranks = running_ranks();
  if (checkpoint.ranks != ranks) {
    throw Error(fmt::format(
        "checkpoint mismatch: the checkpoint was written by a run of {} ranks, but this run has "
        "{}; resuming at another number of ranks is refused (each rank's data shard and the "
        "learning-rate scaling depend on it): resume with {} ranks",
        checkpoint.ranks, ranks, checkpoint.ranks));
  }
  std::unordered_map<std::string, const CheckpointParameter*> saved;
  for (const CheckpointParameter& p : checkpoint.parameters) {
    if (!saved.emplace(p.name, &p).second) {
      throw Error(fmt::format("checkpoint: parameter '{}' appears twice", p.name));
    }
  }
  std::vector<const CheckpointParameter*> sources;
  std::unordered_set<std::string> given;
  for (const Parameter& p : params) {
    if (!given.insert(p.name()).second) {
      throw Error(fmt::format("apply_checkpoint: parameter '{}' is given twice", p.name()));
    }
    auto it = saved.find(p.name());
    if (it == saved.end()) {
      throw Error(fmt::format(
          "checkpoint mismatch: parameter '{}' (size {}) is not in the checkpoint, which holds {} "
          "parameters",
          p.name(), p.size(), checkpoint.parameters.size()));
    }
    const auto saved_size = static_cast<int64_t>(it->second->values.size());
    if (saved_size != p.size()) {
      throw Error(
          fmt::format("checkpoint mismatch: parameter '{}' has size {} in the checkpoint but {} "
                      "in the model",
                      p.name(), saved_size, p.size()));
    }
    sources.push_back(it->second);
  }
  for (const CheckpointParameter& p : checkpoint.parameters) {
    if (given.count(p.name) == 0) {
      throw Error(fmt::format(
          "checkpoint mismatch: the checkpoint's parameter '{}' (size {}) is not in the model",
          p.name, p.values.size()));
    }
  }

  optimizer.init_state(params);
  if (checkpoint.optimizer.step == 0 && checkpoint.optimizer.buffers.empty()) {
    // Saved before the optimizer had any state: restore the fresh, zeroed one.
    OptimizerState zero = optimizer.export_state();
    zero.step = 0;
    for (StateBuffer& b : zero.buffers) std::fill(b.values.begin(), b.values.end(), 0.0f);
    optimizer.import_state(zero);
  } else {
    optimizer.import_state(checkpoint.optimizer);
  }

  for (std::size_t i = 0; i < params.size(); ++i) {
    if (params[i].size() > 0) {
      std::memcpy(params[i].value(), sources[i]->values.data(),
                  static_cast<std::size_t>(params[i].size()) * sizeof(float));
    }
  }
}

}  // namespace herd
