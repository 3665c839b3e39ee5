// One worker's part of a RecordIO dataset: dmlc-core's two partitionings
// (include/herd/data/record_shard.h).
#include "herd/data/record_shard.h"

#include <unistd.h>

#include <algorithm>

#include "data/framing.h"
#include "herd/data/record_index.h"
#include "herd/error.h"

namespace herd::data {
namespace {

void check_part(int part_index, int num_parts) {
  if (num_parts < 1) {
    throw Error("RecordShard: num_parts must be at least 1, got " + std::to_string(num_parts),
                ErrorKind::kInvalidArgument);
  }
  if (part_index < 0 || part_index >= num_parts) {
    throw Error("RecordShard: part_index " + std::to_string(part_index) +
                    " lies outside [0, num_parts) with num_parts = " + std::to_string(num_parts),
                ErrorKind::kInvalidArgument);
  }
}

// The part headers of one file, read through a window. Walking a part's
// framing touches only the headers: small records share a window (one
// system call for many), a large record's header is read alone, so the
// walk never reads the data of large records.
class HeaderReader {
 public:
  static constexpr uint64_t kWindow = 64 * 1024;

  HeaderReader(const std::string& path, uint64_t size)
      : path_(path), size_(size), window_(kWindow) {
    uint64_t opened_size = 0;
    fd_ = detail::open_for_reading(path, &opened_size);
  }
  ~HeaderReader() { ::close(fd_); }
  HeaderReader(const HeaderReader&) = delete;
  HeaderReader& operator=(const HeaderReader&) = delete;

  // The 8 bytes of the part header at `offset`; offset + 8 <= size.
  // `large_part` says the part before was longer than a window is worth.
  const uint8_t* header(uint64_t offset, bool large_part) {
    if (offset >= window_begin_ && offset + detail::kPartHeaderSize <= window_end_) {
      return window_.data() + (offset - window_begin_);
    }
    const uint64_t wanted = large_part ? detail::kPartHeaderSize : kWindow;
    const std::size_t length = static_cast<std::size_t>(std::min(wanted, size_ - offset));
    const std::size_t got = detail::read_fully(fd_, window_.data(), length, offset, path_);
    if (got < length) {
      detail::throw_framing_error(path_, offset + got,
                                  "the file ended early: it shrank while being read");
    }
    window_begin_ = offset;
    window_end_ = offset + length;
    return window_.data();
  }

 private:
  std::string path_;
  uint64_t size_;
  int fd_ = -1;
  uint64_t window_begin_ = 0;
  uint64_t window_end_ = 0;
  std::vector<uint8_t> window_;
};

// A part at least this long is followed by a header read on its own.
constexpr uint64_t kLargePart = 16 * 1024;

// Checks the framing of the record whose head is at `offset` and returns the
// offset just past it. Throws herd::Error naming the file and the part's
// offset, as the readers do.
uint64_t walk_record(HeaderReader& headers, const std::string& path, uint64_t offset, uint64_t size,
                     bool* large_part) {
  int previous_cflag = -1;
  uint64_t at = offset;
  while (true) {
    if (at > size || size - at < detail::kPartHeaderSize) {
      detail::throw_truncated_header(path, at, at > size ? 0 : size - at, size);
    }
    const detail::PartHeader part =
        detail::parse_part_header(headers.header(at, *large_part), previous_cflag, path, at, size);
    *large_part = part.span() >= kLargePart;
    at += part.span();
    if (!part.continues()) return at;
    previous_cflag = static_cast<int>(part.cflag);
  }
}

}  // namespace

std::pair<uint64_t, uint64_t> nominal_byte_range(uint64_t total, int part_index, int num_parts) {
  check_part(part_index, num_parts);
  const uint64_t parts = static_cast<uint64_t>(num_parts);
  const uint64_t part = static_cast<uint64_t>(part_index);
  // Rounded up to whole 4-byte words, where record heads lie.
  uint64_t step = total / parts + (total % parts != 0 ? 1 : 0);
  step = (step + 3) / 4 * 4;
  return {std::min(step * part, total), std::min(step * (part + 1), total)};
}

std::pair<std::size_t, std::size_t> index_part(std::size_t count, int part_index, int num_parts) {
  check_part(part_index, num_parts);
  const std::size_t parts = static_cast<std::size_t>(num_parts);
  const std::size_t part = static_cast<std::size_t>(part_index);
  const std::size_t step = count / parts + (count % parts != 0 ? 1 : 0);
  return {std::min(step * part, count), std::min(step * (part + 1), count)};
}

RecordShard RecordShard::by_byte_range(const std::vector<std::string>& rec_paths, int part_index,
                                       int num_parts) {
  check_part(part_index, num_parts);
  if (rec_paths.empty()) {
    throw Error("RecordShard: no RecordIO file given", ErrorKind::kInvalidArgument);
  }
  RecordShard shard;
  shard.mode_ = ShardMode::kByteRange;
  shard.part_index_ = part_index;
  shard.num_parts_ = num_parts;
  // starts[f] is file f's first byte in the concatenated stream; the last
  // entry is the stream's length.
  std::vector<uint64_t> starts;
  uint64_t total = 0;
  for (const std::string& path : rec_paths) {
    shard.files_.emplace_back(path);
    starts.push_back(total);
    total += shard.files_.back().size();
  }
  starts.push_back(total);

  // The file holding stream byte `at` < total; empty files hold none.
  const auto file_of = [&](uint64_t at) {
    return static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), at) -
                                    starts.begin() - 1);
  };
  // The first record head at or after stream byte `at`: each file begins
  // with one, and a file without another head after `at` ends where the
  // next file begins.
  const auto next_head = [&](uint64_t at) {
    if (at >= total) return total;
    const std::size_t file = file_of(at);
    const uint64_t local = at - starts[file];
    return local == 0 ? at : starts[file] + shard.files_[file].seek_record_head(local);
  };
  const std::pair<uint64_t, uint64_t> nominal = nominal_byte_range(total, part_index, num_parts);
  const uint64_t begin = next_head(nominal.first);
  const uint64_t end = next_head(nominal.second);
  if (begin >= end) return shard;

  for (std::size_t file = file_of(begin); file < shard.files_.size() && starts[file] < end;
       ++file) {
    const RecordFile& rec = shard.files_[file];
    const uint64_t local_begin = std::max(begin, starts[file]) - starts[file];
    const uint64_t local_end = std::min(end, starts[file + 1]) - starts[file];
    if (local_begin >= local_end) continue;
    HeaderReader headers(rec.path(), rec.size());
    bool large_part = false;
    uint64_t at = local_begin;
    while (at < local_end) {
      const uint64_t head = at;
      shard.records_.push_back({static_cast<uint32_t>(file), head});
      at = walk_record(headers, rec.path(), head, rec.size(), &large_part);
      // In a well-formed file no aligned word inside a record looks like a
      // head, so the record before the next part's first head ends there.
      if (at > local_end) {
        detail::throw_framing_error(
            rec.path(), head,
            "broken framing: the record there runs to byte " + std::to_string(at) + ", past byte " +
                std::to_string(local_end) +
                ", which looks like a record head (a magic word the writer would have "
                "escaped) and begins the next part (part_index " +
                std::to_string(part_index + 1) + ", num_parts " + std::to_string(num_parts) + ")");
      }
    }
    shard.byte_ranges_.push_back({static_cast<uint32_t>(file), local_begin, local_end});
  }
  return shard;
}

RecordShard RecordShard::by_index(const std::string& rec_path, const std::string& idx_path,
                                  int part_index, int num_parts) {
  check_part(part_index, num_parts);
  RecordShard shard;
  shard.mode_ = ShardMode::kIndex;
  shard.part_index_ = part_index;
  shard.num_parts_ = num_parts;
  shard.files_.emplace_back(rec_path);
  const uint64_t size = shard.files_.front().size();

  // dmlc's indexed split takes the records in the order of their offsets,
  // whatever the order of the keys.
  const std::vector<IndexEntry> entries = read_index(idx_path);
  std::vector<const IndexEntry*> sorted;
  sorted.reserve(entries.size());
  for (const IndexEntry& entry : entries) {
    if (entry.offset >= size) {
      throw Error("RecordShard: index file '" + idx_path + "' gives key " +
                  std::to_string(entry.key) + " the offset " + std::to_string(entry.offset) +
                  ", past the last record of '" + rec_path + "' (" + std::to_string(size) +
                  " bytes)");
    }
    sorted.push_back(&entry);
  }
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const IndexEntry* a, const IndexEntry* b) { return a->offset < b->offset; });
  for (std::size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i]->offset == sorted[i - 1]->offset) {
      throw Error("RecordShard: index file '" + idx_path + "' gives keys " +
                  std::to_string(sorted[i - 1]->key) + " and " + std::to_string(sorted[i]->key) +
                  " the same offset " + std::to_string(sorted[i]->offset) + " of '" + rec_path +
                  "'");
    }
  }
  const std::pair<std::size_t, std::size_t> part = index_part(sorted.size(), part_index, num_parts);
  shard.records_.reserve(part.second - part.first);
  for (std::size_t i = part.first; i < part.second; ++i) {
    shard.records_.push_back({0, sorted[i]->offset});
  }
  return shard;
}

void RecordShard::read(const RecordLocation& where, std::vector<uint8_t>* record) const {
  check_file(where);
  files_[where.file].read_at(where.offset, record);
}

void RecordShard::check_file(const RecordLocation& where) const {
  if (where.file >= files_.size()) {
    throw Error("RecordShard: a record of file #" + std::to_string(where.file) +
                    " asked for, where the shard has " + std::to_string(files_.size()) + " files",
                ErrorKind::kInvalidArgument);
  }
}

void RecordShard::read(std::size_t i, std::vector<uint8_t>* record) const {
  const RecordLocation& where = records_.at(i);
  check_file(where);
  const RecordFile& file = files_[where.file];
  // The records are in file order: this one ends where the next of its file
  // begins, or (as far as the hint goes) at the file's end.
  const bool next_in_file = i + 1 < records_.size() && records_[i + 1].file == where.file &&
                            records_[i + 1].offset > where.offset;
  const uint64_t end = next_in_file ? records_[i + 1].offset : file.size();
  file.read_at(where.offset, record, end - where.offset);
}

std::string RecordShard::describe(const RecordLocation& where) const {
  const std::string file = where.file < files_.size() ? files_[where.file].path()
                                                      : "file #" + std::to_string(where.file);
  return file + " at byte " + std::to_string(where.offset);
}

}  // namespace herd::data
