#include "tools/herd_rec/pack.h"

#include <cstdio>
#include <functional>
#include <sstream>
#include <vector>

#include "herd/data/idx_file.h"
#include "herd/data/image_record.h"
#include "herd/data/record_index.h"
#include "herd/error.h"
#include "tools/herd_rec/file_io.h"
#include "tools/herd_rec/lst_file.h"

namespace herd::rec_tool {
namespace {

// Creates the .rec and its .idx and lets `write_records` fill them, returning
// the count. A failure part way removes both files: a .rec cut short at a
// record boundary would read as a whole one.
PackSummary write_indexed(
    const std::string& rec_path,
    const std::function<uint64_t(herd::data::IndexedRecordWriter&)>& write_records) {
  PackSummary summary;
  summary.rec_path = rec_path;
  summary.idx_path = data::index_path_for(rec_path);
  try {
    herd::data::IndexedRecordWriter writer(summary.idx_path, rec_path);
    summary.records = write_records(writer);
    writer.close();
  } catch (...) {
    std::remove(summary.rec_path.c_str());
    std::remove(summary.idx_path.c_str());
    throw;
  }
  summary.bytes = herd::data::RecordFile(rec_path).size();
  return summary;
}

}  // namespace

PackSummary pack_idx(const std::string& images_path, const std::string& labels_path,
                     const std::string& rec_path) {
  const herd::data::IdxArray images = herd::data::read_idx_file(images_path);
  if (images.dims.size() < 2) {
    throw herd::Error("IDX file " + images_path +
                      ": has 1 dimension; an images file has 2 or more (the count, then each "
                      "image's)");
  }
  const herd::data::IdxArray labels = herd::data::read_idx_file(labels_path, 1);
  const uint64_t count = images.dims[0];
  if (labels.dims[0] != count) {
    std::ostringstream message;
    message << "IDX files disagree: " << images_path << " has " << count << " images but "
            << labels_path << " has " << labels.dims[0] << " labels";
    throw herd::Error(message.str());
  }
  // read_idx_file checked that the product of the dimensions fits.
  uint64_t image_bytes = 1;
  for (std::size_t d = 1; d < images.dims.size(); ++d) image_bytes *= images.dims[d];

  return write_indexed(rec_path, [&](herd::data::IndexedRecordWriter& writer) {
    for (uint64_t i = 0; i < count; ++i) {
      herd::data::ImageRecordHeader header;
      header.label = static_cast<float>(labels.data[i]);
      header.id = i;
      const std::vector<uint8_t> record = herd::data::pack_image_record(
          header, {}, images.data.data() + i * image_bytes, static_cast<std::size_t>(image_bytes));
      writer.write(static_cast<int64_t>(i), record.data(), record.size());
    }
    return count;
  });
}

PackSummary pack_lst(const std::string& lst_path, const std::string& root, bool pack_label,
                     const std::string& rec_path) {
  const std::vector<LstEntry> entries = read_lst(lst_path);
  const std::string directory = root.empty() ? directory_of(lst_path) : root;

  return write_indexed(rec_path, [&](herd::data::IndexedRecordWriter& writer) {
    for (const LstEntry& entry : entries) {
      const std::string path = join_path(directory, entry.path);
      std::vector<uint8_t> payload;
      try {
        payload = read_whole_file(path);
      } catch (const herd::Error& e) {
        throw herd::Error(lst_path + " line " + std::to_string(entry.line) + ": " + e.what());
      }
      herd::data::ImageRecordHeader header;
      header.label = entry.labels.front();
      header.id = static_cast<uint64_t>(entry.index);
      const bool several = pack_label && entry.labels.size() > 1;
      const std::vector<uint8_t> record = herd::data::pack_image_record(
          header, several ? entry.labels : std::vector<float>{}, payload.data(), payload.size());
      writer.write(entry.index, record.data(), record.size());
    }
    return uint64_t(entries.size());
  });
}

}  // namespace herd::rec_tool
