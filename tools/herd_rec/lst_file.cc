#include "tools/herd_rec/lst_file.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

#include "herd/error.h"
#include "tools/herd_rec/file_io.h"

namespace herd::rec_tool {
namespace {

std::string trim(const std::string& text) {
  const char* space = " \t\r\n\v\f";
  const std::size_t first = text.find_first_not_of(space);
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(space) - first + 1);
}

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t tab = line.find('\t', start);
    fields.push_back(trim(line.substr(start, tab - start)));
    if (tab == std::string::npos) return fields;
    start = tab + 1;
  }
}

[[noreturn]] void fail(const std::string& name, int line, const std::string& what) {
  throw herd::Error(name + " line " + std::to_string(line) + ": " + what);
}

}  // namespace

std::vector<LstEntry> parse_lst(const std::string& text, const std::string& name) {
  std::vector<LstEntry> entries;
  std::unordered_map<int64_t, int> line_of_index;
  std::size_t start = 0;
  int line_number = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (trim(line).empty()) continue;
    const std::vector<std::string> fields = split_tabs(trim(line));
    if (fields.size() < 3) {
      fail(name, line_number,
           "has " + std::to_string(fields.size()) +
               " tab-separated field(s); a line is index<TAB>label[<TAB>label...]<TAB>path");
    }
    LstEntry entry;
    entry.line = line_number;
    const std::string& index = fields.front();
    char* rest = nullptr;
    errno = 0;
    const long long value = std::strtoll(index.c_str(), &rest, 10);
    if (index.empty() || *rest != '\0' || errno == ERANGE || value < 0) {
      fail(name, line_number, "index '" + index + "' is not a non-negative integer");
    }
    entry.index = value;
    for (std::size_t i = 1; i + 1 < fields.size(); ++i) {
      const std::string& label = fields[i];
      rest = nullptr;
      // Through double, as im2rec's float() then struct's 'f' rounds.
      const double number = std::strtod(label.c_str(), &rest);
      if (label.empty() || *rest != '\0') {
        fail(name, line_number, "label " + std::to_string(i) + " '" + label + "' is not a number");
      }
      entry.labels.push_back(static_cast<float>(number));
    }
    entry.path = fields.back();
    if (entry.path.empty()) fail(name, line_number, "the path (the last field) is empty");
    const auto [first, inserted] = line_of_index.emplace(entry.index, line_number);
    if (!inserted) {
      fail(name, line_number,
           "index " + std::to_string(entry.index) + " is given twice (first on line " +
               std::to_string(first->second) + ")");
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

std::vector<LstEntry> read_lst(const std::string& path) {
  const std::vector<uint8_t> bytes = read_whole_file(path);
  return parse_lst(std::string(bytes.begin(), bytes.end()), path);
}

std::string format_lst_line(int64_t index, const std::vector<float>& labels,
                            const std::string& path) {
  std::string line = std::to_string(index);
  char number[32];
  for (float label : labels) {
    std::snprintf(number, sizeof(number), "%.9g", static_cast<double>(label));
    line += '\t';
    line += number;
  }
  line += '\t';
  line += path;
  line += '\n';
  return line;
}

}  // namespace herd::rec_tool
