#include "tools/herd_rec/unpack.h"

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <system_error>
#include <vector>

#include <sys/stat.h>

#include "herd/data/image_record.h"
#include "herd/data/recordio.h"
#include "herd/error.h"
#include "tools/herd_rec/file_io.h"
#include "tools/herd_rec/lst_file.h"

namespace herd::rec_tool {
namespace {

// Creates `path` and the directories above it that are missing.
void make_directories(const std::string& path) {
  for (std::size_t slash = path.find('/', 1);; slash = path.find('/', slash + 1)) {
    const std::string prefix = path.substr(0, slash);
    if (!prefix.empty() && ::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
      throw herd::Error(prefix + ": cannot be created: " + std::strerror(errno));
    }
    if (slash == std::string::npos) break;
  }
  struct stat info;
  if (::stat(path.c_str(), &info) != 0 || !S_ISDIR(info.st_mode)) {
    throw herd::Error(path + ": is not a directory");
  }
}

std::string lst_name(const std::string& rec_path) {
  const std::size_t slash = rec_path.rfind('/');
  std::string name = slash == std::string::npos ? rec_path : rec_path.substr(slash + 1);
  const std::string suffix = ".rec";
  if (name.size() > suffix.size() &&
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
    name.resize(name.size() - suffix.size());
  }
  return name + ".lst";
}

}  // namespace

const char* payload_extension(const uint8_t* data, std::size_t size) {
  static const uint8_t kJpeg[] = {0xff, 0xd8, 0xff};
  static const uint8_t kPng[] = {0x89, 'P', 'N', 'G'};
  if (size >= sizeof(kJpeg) && std::memcmp(data, kJpeg, sizeof(kJpeg)) == 0) return "jpg";
  if (size >= sizeof(kPng) && std::memcmp(data, kPng, sizeof(kPng)) == 0) return "png";
  return "bin";
}

UnpackSummary unpack(const std::string& rec_path, const std::string& directory, bool raw) {
  herd::data::RecordReader reader(rec_path);
  make_directories(directory);
  UnpackSummary summary;
  summary.lst_path = join_path(directory, lst_name(rec_path));
  std::string lst;
  std::vector<uint8_t> record;
  char name[64];
  for (uint64_t i = 0;; ++i) {
    const uint64_t head = reader.tell();
    if (!reader.next(&record)) break;
    const uint8_t* payload = record.data();
    std::size_t payload_size = record.size();
    int64_t index = static_cast<int64_t>(i);
    std::vector<float> labels{0.0f};
    if (!raw) {
      const std::string where = rec_path + ": record at byte " + std::to_string(head);
      const herd::data::ImageRecord image =
          herd::data::unpack_image_record(record.data(), record.size(), where);
      if (image.header.id > uint64_t(std::numeric_limits<int64_t>::max())) {
        throw herd::Error(where + ": id " + std::to_string(image.header.id) +
                          " is larger than an .lst index can be");
      }
      index = static_cast<int64_t>(image.header.id);
      labels = image.labels;
      payload = image.payload;
      payload_size = image.payload_size;
    }
    std::snprintf(name, sizeof(name), "%08" PRIu64 ".%s", i,
                  payload_extension(payload, payload_size));
    write_whole_file(join_path(directory, name), payload, payload_size);
    lst += format_lst_line(index, labels, name);
    ++summary.records;
  }
  write_whole_file(summary.lst_path, lst);
  return summary;
}

}  // namespace herd::rec_tool
