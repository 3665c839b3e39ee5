// im2rec's image lists (.lst): one line per image,
//   index \t label [\t label ...] \t path
// the index an integer (the record's key and IRHeader id), the labels
// floats, the path relative to a root directory. Fields are split at tabs
// and trimmed, as im2rec does; blank lines are skipped. Where im2rec skips a
// line it cannot read, herd-rec stops: every error names the .lst file and
// the line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::rec_tool {

struct LstEntry {
  int64_t index = 0;
  std::vector<float> labels;  // one or more
  std::string path;
  int line = 0;  // 1-based, in the .lst it came from
};

// The entries of the .lst at `path` in its order. Throws herd::Error naming
// the file and line for a line with fewer than three fields, an index that
// is not a non-negative integer, a label that is not a number, or an index
// given twice.
std::vector<LstEntry> read_lst(const std::string& path);
std::vector<LstEntry> parse_lst(const std::string& text, const std::string& name);

// The line (with its newline) that parse_lst reads back as the same index,
// labels and path: labels are written with 9 significant digits, which give
// back the same float32.
std::string format_lst_line(int64_t index, const std::vector<float>& labels,
                            const std::string& path);

}  // namespace herd::rec_tool
