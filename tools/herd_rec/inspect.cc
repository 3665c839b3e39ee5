#include "tools/herd_rec/inspect.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <vector>

#include "herd/data/image_record.h"
#include "herd/data/record_index.h"
#include "herd/data/recordio.h"
#include "herd/error.h"

namespace herd::rec_tool {
namespace {

// Label values listed by info; a file of regression targets has a value per
// record, and the list would drown the rest.
constexpr std::size_t kMaxLabelLines = 100;

std::string where(const std::string& path, uint64_t offset) {
  return path + ": record at byte " + std::to_string(offset);
}

void count_payload(RecordStats* stats, uint64_t size) {
  stats->payload_min = stats->records == 1 ? size : std::min(stats->payload_min, size);
  stats->payload_max = std::max(stats->payload_max, size);
  stats->payload_total += size;
}

void add_line(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void add_line(std::string* out, const char* format, ...) {
  char line[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof(line), format, args);
  va_end(args);
  *out += line;
  *out += '\n';
}

}  // namespace

uint64_t aligned_magic_words(const uint8_t* data, std::size_t size) {
  uint64_t count = 0;
  for (std::size_t i = 0; i + 4 <= size; i += 4) {
    uint32_t word;
    std::memcpy(&word, data + i, 4);
    count += word == herd::data::kRecordMagic;
  }
  return count;
}

RecordStats collect_stats(const std::string& rec_path, bool raw) {
  herd::data::RecordReader reader(rec_path);
  RecordStats stats;
  stats.path = rec_path;
  stats.raw = raw;
  stats.bytes = reader.size();
  std::vector<uint8_t> record;
  for (;;) {
    const uint64_t head = reader.tell();
    if (!reader.next(&record)) break;
    ++stats.records;
    const uint64_t escaped = aligned_magic_words(record.data(), record.size());
    stats.escaped_magic_words += escaped;
    stats.split_records += escaped > 0;
    if (raw) {
      count_payload(&stats, record.size());
      continue;
    }
    herd::data::ImageRecord image;
    try {
      image = herd::data::unpack_image_record(record.data(), record.size(), where(rec_path, head));
    } catch (const herd::Error& e) {
      throw herd::Error(std::string(e.what()) + " (--raw reads a file without image headers)");
    }
    count_payload(&stats, image.payload_size);
    if (image.header.flag > 0) {
      ++stats.label_counts[image.header.flag];
    } else if (std::isnan(image.header.label)) {
      ++stats.nan_labels;
    } else {
      ++stats.labels[image.header.label];
    }
  }
  return stats;
}

std::string format_stats(const RecordStats& stats) {
  std::string out;
  add_line(&out, "file: %s", stats.path.c_str());
  add_line(&out, "bytes: %" PRIu64, stats.bytes);
  add_line(&out, "records: %" PRIu64, stats.records);
  add_line(&out, "split records: %" PRIu64 " (%" PRIu64 " magic words escaped)",
           stats.split_records, stats.escaped_magic_words);
  const char* what = stats.raw ? "record" : "payload";
  if (stats.records == 0) {
    add_line(&out, "%s bytes: 0", what);
  } else {
    add_line(&out, "%s bytes: %" PRIu64 " (min %" PRIu64 ", max %" PRIu64 ", mean %.1f)", what,
             stats.payload_total, stats.payload_min, stats.payload_max,
             double(stats.payload_total) / double(stats.records));
  }
  if (stats.raw) return out;
  std::size_t listed = 0;
  for (const auto& [label, count] : stats.labels) {
    if (listed++ == kMaxLabelLines) {
      add_line(&out, "label ...: %zu more values", stats.labels.size() - kMaxLabelLines);
      break;
    }
    add_line(&out, "label %.9g: %" PRIu64, double(label), count);
  }
  if (stats.nan_labels > 0) add_line(&out, "label nan: %" PRIu64, stats.nan_labels);
  for (const auto& [labels, count] : stats.label_counts) {
    add_line(&out, "labels per record %" PRIu32 ": %" PRIu64, labels, count);
  }
  return out;
}

VerifySummary verify(const std::string& rec_path, const std::string& idx_path) {
  herd::data::RecordReader reader(rec_path);
  VerifySummary summary;
  summary.bytes = reader.size();
  std::vector<uint64_t> heads;
  std::vector<uint8_t> record;
  for (;;) {
    const uint64_t head = reader.tell();
    if (!reader.next(&record)) break;
    heads.push_back(head);
    summary.split_records += aligned_magic_words(record.data(), record.size()) > 0;
  }
  summary.records = heads.size();
  if (idx_path.empty()) return summary;
  const std::vector<herd::data::IndexEntry> entries = herd::data::read_index(idx_path);
  for (const herd::data::IndexEntry& entry : entries) {
    if (std::binary_search(heads.begin(), heads.end(), entry.offset)) continue;
    std::string why;
    if (entry.offset >= summary.bytes) {
      why = "past the end of " + rec_path + " (" + std::to_string(summary.bytes) + " bytes)";
    } else {
      // The heads around it say where the records really begin.
      const auto next = std::upper_bound(heads.begin(), heads.end(), entry.offset);
      why = "not a record head of " + rec_path + " (the record around it begins at byte " +
            std::to_string(*(next - 1)) + ")";
    }
    throw herd::Error(idx_path + ": key " + std::to_string(entry.key) + "'s offset " +
                      std::to_string(entry.offset) + " is " + why);
  }
  summary.indexed = entries.size();
  return summary;
}

}  // namespace herd::rec_tool
