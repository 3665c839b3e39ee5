#include "tools/timeline/stragglers.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

namespace herd::timeline_tool {
namespace {

using TrackKey = std::pair<std::string, int>;  // tensor name, process set

// Each track's submissions (NEGOTIATE_* begins) in microseconds since the
// epoch, in file order.
std::map<TrackKey, std::vector<double>> submissions(const RankTrace& trace) {
  std::map<int64_t, std::string> names;
  for (const auto& [pid, name] : process_names(trace)) names[pid] = name;
  std::map<TrackKey, std::vector<double>> found;
  for (const nlohmann::json& event : trace.events) {
    if (event.value("ph", "") != "B") continue;
    if (event.value("name", "").rfind("NEGOTIATE_", 0) != 0) continue;
    const auto name = names.find(event.at("pid").get<int64_t>());
    if (name == names.end()) continue;
    const double at = static_cast<double>(trace.start_micros) + event.at("ts").get<double>();
    found[{name->second, event.value("tid", 0)}].push_back(at);
  }
  return found;
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string pad_left(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : std::string(width - text.size(), ' ') + text;
}

std::string pad_right(const std::string& text, std::size_t width) {
  return text.size() >= width ? text : text + std::string(width - text.size(), ' ');
}

// The index of the largest value; the first of equals.
std::size_t last_of(const std::vector<double>& moments) {
  return static_cast<std::size_t>(std::max_element(moments.begin(), moments.end()) -
                                  moments.begin());
}

}  // namespace

StragglerReport find_stragglers(const std::vector<RankTrace>& traces) {
  StragglerReport report;
  const std::size_t ranks = traces.size();
  for (const RankTrace& trace : traces) report.ranks.push_back(trace.rank);
  report.times_last.assign(ranks, 0);
  report.total_wait_ms.assign(ranks, 0.0);
  if (ranks == 0) return report;

  std::vector<std::map<TrackKey, std::vector<double>>> by_rank;
  for (const RankTrace& trace : traces) by_rank.push_back(submissions(trace));
  for (const auto& [key, first_moments] : by_rank.front()) {
    std::size_t matched = first_moments.size();
    for (std::size_t r = 1; r < ranks; ++r) {
      const auto found = by_rank[r].find(key);
      matched = found == by_rank[r].end() ? 0 : std::min(matched, found->second.size());
    }
    if (matched == 0) continue;
    TensorStragglers tensor;
    tensor.tensor = key.first;
    tensor.set_id = key.second;
    tensor.occurrences = static_cast<int>(matched);
    tensor.mean_wait_ms.assign(ranks, 0.0);
    tensor.times_last.assign(ranks, 0);
    std::vector<double> moments(ranks);
    for (std::size_t k = 0; k < matched; ++k) {
      for (std::size_t r = 0; r < ranks; ++r) moments[r] = by_rank[r].at(key)[k];
      const std::size_t last = last_of(moments);
      ++tensor.times_last[last];
      ++report.times_last[last];
      for (std::size_t r = 0; r < ranks; ++r) {
        const double wait_ms = (moments[last] - moments[r]) / 1000.0;
        tensor.mean_wait_ms[r] += wait_ms / static_cast<double>(matched);
        report.total_wait_ms[r] += wait_ms;
      }
    }
    report.occurrences += tensor.occurrences;
    report.tensors.push_back(std::move(tensor));
  }
  const auto longest = [](const TensorStragglers& tensor) {
    return *std::max_element(tensor.mean_wait_ms.begin(), tensor.mean_wait_ms.end());
  };
  std::sort(report.tensors.begin(), report.tensors.end(),
            [&](const TensorStragglers& a, const TensorStragglers& b) {
              const double wait_a = longest(a);
              const double wait_b = longest(b);
              if (wait_a != wait_b) return wait_a > wait_b;
              return std::make_pair(a.tensor, a.set_id) < std::make_pair(b.tensor, b.set_id);
            });
  return report;
}

std::string format_report(const StragglerReport& report, std::size_t top) {
  std::string out;
  const std::size_t ranks = report.ranks.size();
  out += std::to_string(ranks) + " rank(s), " + std::to_string(report.tensors.size()) +
         " tensor(s) on every rank, " + std::to_string(report.occurrences) +
         " submission(s) compared\n";
  if (report.occurrences == 0) return out;
  out += "rank  last (times)  waited for the last rank (ms, total)\n";
  for (std::size_t r = 0; r < ranks; ++r) {
    out += pad_left(std::to_string(report.ranks[r]), 4) +
           pad_left(std::to_string(report.times_last[r]), 14) +
           pad_left(fixed(report.total_wait_ms[r], 3), 38) + "\n";
  }
  const std::size_t most = static_cast<std::size_t>(
      std::max_element(report.times_last.begin(), report.times_last.end()) -
      report.times_last.begin());
  out += "most often last: rank " + std::to_string(report.ranks[most]) + " (" +
         std::to_string(report.times_last[most]) + " of " + std::to_string(report.occurrences) +
         ")\n\n";

  const std::size_t shown = top == 0 ? report.tensors.size() : std::min(top, report.tensors.size());
  std::size_t name_width = 6;
  for (std::size_t i = 0; i < shown; ++i) {
    name_width = std::max(name_width, report.tensors[i].tensor.size());
  }
  out += "mean wait of each rank for the last rank (ms), the longest first";
  if (shown < report.tensors.size()) {
    out += " (" + std::to_string(shown) + " of " + std::to_string(report.tensors.size()) + ")";
  }
  out += "\n" + pad_right("tensor", name_width) + "  set      n  last most often";
  for (int rank : report.ranks) out += pad_left("rank " + std::to_string(rank), 10);
  out += "\n";
  for (std::size_t i = 0; i < shown; ++i) {
    const TensorStragglers& tensor = report.tensors[i];
    const std::size_t last = static_cast<std::size_t>(
        std::max_element(tensor.times_last.begin(), tensor.times_last.end()) -
        tensor.times_last.begin());
    out += pad_right(tensor.tensor, name_width) + pad_left(std::to_string(tensor.set_id), 5) +
           pad_left(std::to_string(tensor.occurrences), 7) + "  " +
           pad_right("rank " + std::to_string(report.ranks[last]) + " (" +
                         std::to_string(tensor.times_last[last]) + ")",
                     15);
    for (double wait : tensor.mean_wait_ms) out += pad_left(fixed(wait, 3), 10);
    out += "\n";
  }
  return out;
}

}  // namespace herd::timeline_tool
