// herd-rec unpack: each record's payload as a file, and an im2rec list that
// herd-rec pack --lst turns back into the same .rec.
#pragma once

#include <cstdint>
#include <string>

namespace herd::rec_tool {

struct UnpackSummary {
  uint64_t records = 0;
  std::string lst_path;
};

// Writes record i's payload (the bytes after its image header and labels;
// with `raw` the whole record) to DIR/<i, 8 digits>.<jpg|png|bin> (by the
// payload's first bytes) and a line per record to DIR/<name of the .rec
// without .rec>.lst: the header's id, its label or labels, the file's name.
// The directory is created when missing. pack --lst of that list gives the
// same .rec when every record is as pack writes it (id2 0; several labels
// need --pack-label, and a record of flag 1 comes back as flag 0, as
// im2rec's); with `raw` the list's labels are 0 and its indices the record
// numbers. Throws herd::Error naming the file and offset of a bad record, or
// a file that cannot be written.
UnpackSummary unpack(const std::string& rec_path, const std::string& directory, bool raw);

// "jpg", "png" or "bin", by the first bytes of a payload.
const char* payload_extension(const uint8_t* data, std::size_t size);

}  // namespace herd::rec_tool
