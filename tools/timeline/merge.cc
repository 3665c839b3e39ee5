#include "tools/timeline/merge.h"

#include <algorithm>
#include <cstdint>

namespace herd::timeline_tool {
namespace {

// The format's version, as herd writes it (src/timeline.cc).
constexpr int kFormatVersion = 2;

int64_t largest_pid(const std::vector<RankTrace>& traces) {
  int64_t largest = 0;
  for (const RankTrace& trace : traces) {
    for (const nlohmann::json& event : trace.events) {
      largest = std::max(largest, event.value("pid", int64_t{0}));
    }
  }
  return largest;
}

}  // namespace

nlohmann::json merge_traces(const std::vector<RankTrace>& traces) {
  int64_t origin = 0;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    origin = i == 0 ? traces[i].start_micros : std::min(origin, traces[i].start_micros);
  }
  const int64_t block = largest_pid(traces) + 1;
  nlohmann::json ranks = nlohmann::json::array();
  nlohmann::json events = nlohmann::json::array();
  for (const RankTrace& trace : traces) {
    ranks.push_back({{"rank", trace.rank},
                     {"file", trace.path},
                     {"start_time_since_epoch_in_micros", trace.start_micros}});
    const int64_t first_pid = static_cast<int64_t>(trace.rank) * block;
    const auto shift = static_cast<double>(trace.start_micros - origin);
    for (const nlohmann::json& original : trace.events) {
      nlohmann::json event = original;
      const int64_t pid = original.value("pid", int64_t{0});
      event["pid"] = first_pid + pid;
      if (event.contains("ts")) event["ts"] = event.at("ts").get<double>() + shift;
      const std::string name = original.value("name", "");
      if (original.value("ph", "") == "M") {
        if (name == "process_name" && pid != 0) {
          event["args"]["name"] =
              "rank " + std::to_string(trace.rank) + ": " + original["args"].value("name", "");
        } else if (name == "process_sort_index") {
          event["args"]["sort_index"] = first_pid + pid;
        }
      }
      events.push_back(std::move(event));
    }
  }
  return {{"displayTimeUnit", "ms"},
          {"otherData",
           {{"herd_timeline_version", kFormatVersion},
            {"merged", true},
            {"start_time_since_epoch_in_micros", origin},
            {"ranks", ranks}}},
          {"traceEvents", events}};
}

}  // namespace herd::timeline_tool
