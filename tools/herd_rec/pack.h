// herd-rec pack: a .rec and its .idx (key = index, offset of the record's
// head) written by herd::data::IndexedRecordWriter, each record an image
// record (IRHeader + payload) as MXNet's recordio.pack and im2rec make them.
// Inputs are checked before the output is created; a failure while writing
// removes the .rec and .idx begun.
#pragma once

#include <cstdint>
#include <string>

namespace herd::rec_tool {

struct PackSummary {
  std::string rec_path;
  std::string idx_path;
  uint64_t records = 0;
  uint64_t bytes = 0;  // of the .rec
};

// From an IDX images file (a count, then each image's dimensions: 2 or more
// dimensions in all) and an IDX labels file (1 dimension, the same count),
// plain or gzipped: record i = IRHeader{flag 0, label = labels[i], id = i,
// id2 = 0} + image i's bytes as they lie in the file, key i. Throws
// herd::Error naming the file at fault, or both when their counts differ.
PackSummary pack_idx(const std::string& images_path, const std::string& labels_path,
                     const std::string& rec_path);

// From an im2rec list (lst_file.h), in its order: each record's payload is
// the bytes of the file at its path (relative paths under `root`, or under
// the .lst's own directory when `root` is empty), its key and IRHeader id
// the index. As im2rec: the first label only, unless `pack_label` and the
// line has several, which then follow the header (flag = their count).
PackSummary pack_lst(const std::string& lst_path, const std::string& root, bool pack_label,
                     const std::string& rec_path);

}  // namespace herd::rec_tool
