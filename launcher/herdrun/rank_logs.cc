#include "launcher/herdrun/rank_logs.h"

#include <charconv>
#include <filesystem>
#include <fstream>
#include <string_view>
#include <system_error>

namespace herd::launcher {

int rank_of_stderr_file(const std::string& path) {
  const std::filesystem::path file(path);
  if (file.filename() != "stderr") return -1;
  const std::string parent = file.parent_path().filename().string();
  constexpr std::string_view kPrefix = "rank.";
  if (parent.compare(0, kPrefix.size(), kPrefix) != 0) return -1;
  int rank = -1;
  const char* first = parent.data() + kPrefix.size();
  const char* last = parent.data() + parent.size();
  const auto [end, error] = std::from_chars(first, last, rank);
  if (error != std::errc() || end != last || first == last || rank < 0) return -1;
  return rank;
}

void RankLogs::poll(FailureReport* report, bool final) {
  std::error_code error;
  // New ranks' files appear as the ranks start.
  for (std::filesystem::recursive_directory_iterator entry(directory_, error), end;
       !error && entry != end; entry.increment(error)) {
    if (!entry->is_regular_file(error)) continue;
    const std::string path = entry->path().string();
    if (files_.count(path)) continue;
    const int rank = rank_of_stderr_file(path);
    if (rank >= 0) files_[path].rank = rank;
  }
  for (auto& [path, file] : files_) {
    std::ifstream in(path, std::ios::binary);
    if (!in) continue;
    in.seekg(file.offset);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    file.offset += static_cast<long long>(bytes.size());
    std::string_view rest(bytes);
    for (auto newline = rest.find('\n'); newline != std::string_view::npos;
         newline = rest.find('\n')) {
      file.partial.append(rest.substr(0, newline));
      report->rank_line(file.rank, file.partial);
      file.partial.clear();
      rest.remove_prefix(newline + 1);
    }
    file.partial.append(rest);
    if (final && !file.partial.empty()) {
      report->rank_line(file.rank, file.partial);
      file.partial.clear();
    }
  }
}

}  // namespace herd::launcher
