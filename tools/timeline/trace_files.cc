#include "tools/timeline/trace_files.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace herd::timeline_tool {

RankTrace parse_rank_trace(const std::string& text, const std::string& path) {
  nlohmann::json file;
  try {
    file = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(path +
                             " is not valid JSON (a timeline still being written lacks its "
                             "closing brackets): " +
                             error.what());
  }
  RankTrace trace;
  trace.path = path;
  try {
    const nlohmann::json& other = file.at("otherData");
    trace.rank = other.at("rank").get<int>();
    trace.start_micros = other.at("start_time_since_epoch_in_micros").get<int64_t>();
    trace.events = file.at("traceEvents");
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(path + " is not a herd timeline: " + error.what());
  }
  if (!trace.events.is_array()) {
    throw std::runtime_error(path + " is not a herd timeline: traceEvents is not an array");
  }
  return trace;
}

std::vector<RankTrace> read_rank_traces(const std::vector<std::string>& paths) {
  std::vector<RankTrace> traces;
  for (const std::string& path : paths) {
    std::ifstream in(path);
    if (!in.good()) throw std::runtime_error("cannot read " + path);
    std::stringstream text;
    text << in.rdbuf();
    traces.push_back(parse_rank_trace(text.str(), path));
  }
  std::sort(traces.begin(), traces.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  for (std::size_t i = 1; i < traces.size(); ++i) {
    if (traces[i].rank == traces[i - 1].rank) {
      throw std::runtime_error(traces[i - 1].path + " and " + traces[i].path +
                               " are both the timeline of rank " + std::to_string(traces[i].rank));
    }
  }
  return traces;
}

std::vector<std::pair<int64_t, std::string>> process_names(const RankTrace& trace) {
  std::vector<std::pair<int64_t, std::string>> names;
  for (const nlohmann::json& event : trace.events) {
    if (event.value("ph", "") == "M" && event.value("name", "") == "process_name") {
      names.emplace_back(event.at("pid").get<int64_t>(),
                         event.at("args").at("name").get<std::string>());
    }
  }
  return names;
}

}  // namespace herd::timeline_tool
