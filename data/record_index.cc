// The .idx file beside a .rec (read_index) and the indexed reader and writer
// built on it (MXIndexedRecordIO).
#include "herd/data/record_index.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <unordered_set>

#include "herd/error.h"

namespace herd::data {
namespace {

struct IndexLine {
  IndexEntry entry;
  std::size_t line = 0;
};

[[noreturn]] void throw_index_error(const std::string& path, std::size_t line,
                                    const std::string& what) {
  throw Error("RecordIO index '" + path + "' line " + std::to_string(line) + ": " + what);
}

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

std::vector<std::string> split_fields(const std::string& text) {
  std::vector<std::string> fields;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t begin = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > begin) fields.push_back(text.substr(begin, i - begin));
  }
  return fields;
}

// A decimal number without sign into `value`; false when `text` is not one
// or it exceeds `limit`.
bool parse_decimal(const std::string& text, uint64_t limit, uint64_t* value) {
  if (text.empty()) return false;
  uint64_t result = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return false;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (result > (limit - digit) / 10) return false;
    result = result * 10 + digit;
  }
  *value = result;
  return true;
}

bool parse_key(const std::string& text, int64_t* key) {
  const bool negative = !text.empty() && text[0] == '-';
  const std::string digits = negative || (!text.empty() && text[0] == '+') ? text.substr(1) : text;
  const uint64_t limit = negative ? uint64_t{1} << 63 : std::numeric_limits<int64_t>::max();
  uint64_t magnitude = 0;
  if (!parse_decimal(digits, limit, &magnitude)) return false;
  // Two's complement: -2^63 has no positive counterpart.
  *key = negative ? static_cast<int64_t>(0 - magnitude) : static_cast<int64_t>(magnitude);
  return true;
}

// The .idx's lines with their line numbers; blank lines are skipped. Each
// key appears once.
std::vector<IndexLine> parse_index(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error("RecordIO index '" + path + "' cannot be opened: " + std::strerror(errno));
  }
  std::vector<IndexLine> lines;
  std::unordered_map<int64_t, std::size_t> line_of_key;
  std::string text;
  std::size_t number = 0;
  while (std::getline(in, text)) {
    ++number;
    const std::vector<std::string> fields = split_fields(text);
    if (fields.empty()) continue;
    if (fields.size() != 2) {
      throw_index_error(path, number,
                        "expected two fields, a key and a byte offset, found " +
                            std::to_string(fields.size()) + " in \"" + text + "\"");
    }
    IndexLine line;
    line.line = number;
    if (!parse_key(fields[0], &line.entry.key)) {
      throw_index_error(path, number,
                        "the key \"" + fields[0] + "\" is not a 64-bit signed integer");
    }
    if (!parse_decimal(fields[1], std::numeric_limits<uint64_t>::max(), &line.entry.offset)) {
      throw_index_error(
          path, number,
          "the offset \"" + fields[1] + "\" is not a byte offset (an unsigned integer)");
    }
    const auto [seen, fresh] = line_of_key.emplace(line.entry.key, number);
    if (!fresh) {
      throw_index_error(path, number,
                        "the key " + std::to_string(line.entry.key) +
                            " is given twice (first on line " + std::to_string(seen->second) + ")");
    }
    lines.push_back(line);
  }
  if (in.bad())
    throw Error("RecordIO index '" + path + "' cannot be read: " + std::strerror(errno));
  return lines;
}

}  // namespace

std::string index_path_for(const std::string& rec_path) {
  const std::string suffix = ".rec";
  if (rec_path.size() > suffix.size() &&
      rec_path.compare(rec_path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return rec_path.substr(0, rec_path.size() - suffix.size()) + ".idx";
  }
  return rec_path + ".idx";
}

std::vector<IndexEntry> read_index(const std::string& idx_path) {
  const std::vector<IndexLine> lines = parse_index(idx_path);
  std::vector<IndexEntry> entries;
  entries.reserve(lines.size());
  for (const IndexLine& line : lines) entries.push_back(line.entry);
  return entries;
}

struct IndexedRecordWriter::State {
  std::string idx_path;
  std::ofstream idx;
  RecordWriter rec;
  std::unordered_set<int64_t> keys;
  bool closed = false;

  State(const std::string& idx_path_, const std::string& rec_path)
      : idx_path(idx_path_), rec(rec_path) {}
};

IndexedRecordWriter::IndexedRecordWriter(const std::string& idx_path, const std::string& rec_path)
    : state_(new State(idx_path, rec_path)) {
  state_->idx.open(idx_path, std::ios::binary | std::ios::trunc);
  if (!state_->idx) {
    const int error = errno;
    delete state_;
    throw Error("RecordIO index '" + idx_path + "' cannot be created: " + std::strerror(error));
  }
}

IndexedRecordWriter::~IndexedRecordWriter() {
  try {
    close();
  } catch (const Error&) {
    // A destructor cannot report it; close() does for callers that ask.
  }
  delete state_;
}

uint64_t IndexedRecordWriter::write(int64_t key, const void* data, std::size_t size) {
  State& s = *state_;
  if (s.closed) {
    throw Error("RecordIO index '" + s.idx_path + "': written to after close()",
                ErrorKind::kInvalidArgument);
  }
  if (s.keys.count(key) != 0) {
    throw Error("RecordIO index '" + s.idx_path + "': the key " + std::to_string(key) +
                    " is already written",
                ErrorKind::kInvalidArgument);
  }
  const uint64_t offset = s.rec.write(data, size);
  s.keys.insert(key);
  s.idx << key << '\t' << offset << '\n';
  return offset;
}

void IndexedRecordWriter::close() {
  State& s = *state_;
  if (s.closed) return;
  s.closed = true;
  s.rec.close();
  s.idx.close();
  if (!s.idx) throw Error("RecordIO index '" + s.idx_path + "' cannot be written");
}

IndexedRecordReader::IndexedRecordReader(const std::string& idx_path, const std::string& rec_path)
    : idx_path_(idx_path), file_(rec_path) {
  const std::vector<IndexLine> lines = parse_index(idx_path);
  keys_.reserve(lines.size());
  offsets_.reserve(lines.size());
  for (const IndexLine& line : lines) {
    if (line.entry.offset >= file_.size()) {
      throw_index_error(idx_path, line.line,
                        "the offset " + std::to_string(line.entry.offset) + " of key " +
                            std::to_string(line.entry.key) + " lies past the end of '" + rec_path +
                            "' (" + std::to_string(file_.size()) + " bytes)");
    }
    keys_.push_back(line.entry.key);
    offsets_.emplace(line.entry.key, line.entry.offset);
  }
}

uint64_t IndexedRecordReader::offset(int64_t key) const {
  const auto found = offsets_.find(key);
  if (found == offsets_.end()) {
    throw Error("RecordIO index '" + idx_path_ + "' has no key " + std::to_string(key),
                ErrorKind::kInvalidArgument);
  }
  return found->second;
}

void IndexedRecordReader::read(int64_t key, std::vector<uint8_t>* record) const {
  const uint64_t at = offset(key);
  try {
    file_.read_at(at, record);
  } catch (const Error& error) {
    throw Error("key " + std::to_string(key) + " of RecordIO index '" + idx_path_ +
                "': " + error.what());
  }
}

}  // namespace herd::data
