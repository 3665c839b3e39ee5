// Reads back a herd timeline (the Chrome trace JSON that HERD_TIMELINE
// writes) in the multi-rank tests: which activities ran for which tensor.
// Each tensor is a trace process, named by a "process_name" metadata event;
// an activity is a "B" (begin) event of that process.
#pragma once

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/mpi/mpi_test_util.h"

namespace herd_test {

struct TimelineActivity {
  std::string tensor;
  std::string activity;
};

// The activities of the timeline at `path` named one of `activities`, in the
// order they began. A file that is not JSON is a failure of case "timeline"
// (naming the file) and gives no activities.
inline std::vector<TimelineActivity> timeline_activities(Recorder& rec, const std::string& path,
                                                         const std::set<std::string>& activities) {
  using json = nlohmann::json;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<TimelineActivity> runs;
  json file;
  try {
    file = json::parse(text.str());
  } catch (const json::exception& e) {
    rec.fail("timeline", path + " is not valid JSON: " + e.what());
    return runs;
  }
  std::map<int, std::string> names;  // pid -> tensor
  for (const json& event : file.at("traceEvents")) {
    const std::string phase = event.at("ph");
    const int pid = event.at("pid");
    const std::string name = event.value("name", "");
    if (phase == "M" && name == "process_name") {
      names[pid] = event.at("args").at("name");
    } else if (phase == "B" && activities.count(name) != 0) {
      runs.push_back({names[pid], name});
    }
  }
  return runs;
}

}  // namespace herd_test
