// Reads back a herd timeline file (the Chrome trace JSON of
// herd::start_timeline and HERD_TIMELINE; docs/timeline.md) in full for the
// timeline's multi-rank tests: each tensor's spans as they nest, its readiness
// marks, the cycle marks and every structural problem (a span left open, time
// that goes back), and the checks of one tensor's track that those tests share.
// tests/mpi/timeline_activities.h reads only which activities began, for the
// tests that ask which algorithm ran.
#pragma once

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/mpi/mpi_test_util.h"

namespace herd_test {

// The allreduce algorithms a job on one host may run when none is fixed.
inline const std::set<std::string> kAllreduceAlgorithms = {"SHM_ALLREDUCE", "RING_ALLREDUCE",
                                                           "RECURSIVE_DOUBLING_ALLREDUCE"};

// `pattern` with its "%r" replaced by `rank`, as herd names each rank's file.
inline std::string rank_path(std::string pattern, int rank) {
  const std::size_t at = pattern.find("%r");
  if (at != std::string::npos) pattern.replace(at, 2, std::to_string(rank));
  return pattern;
}

// The file parsed as JSON; a failure (no file, not JSON) is recorded and
// gives null.
inline nlohmann::json parse_file(Recorder& rec, const std::string& case_name,
                                 const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    rec.fail(case_name, "cannot read " + path);
    return nlohmann::json();
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    rec.fail(case_name, path + " is not valid JSON: " + e.what());
    return nlohmann::json();
  }
}

// One span of a track, with the spans nested in it.
struct Span {
  std::string name;
  double begin = 0;
  double end = 0;
  nlohmann::json args;
  std::vector<Span> children;
};

// What a file says: each tensor's top-level spans, the cycle marks, and the
// problems of its structure (a track that does not nest, time that goes back).
struct Trace {
  int64_t start_micros = 0;
  int rank = -1;
  std::map<std::string, std::vector<Span>> spans;  // by tensor name
  // The readiness marks on each tensor's track: the ranks they name, in order,
  // and when.
  std::map<std::string, std::vector<int>> ready;
  std::map<std::string, std::vector<std::pair<int, double>>> ready_at;
  int cycle_marks = 0;
  double last_ts = 0;
  std::vector<std::string> problems;
};

inline Trace read_trace(const nlohmann::json& file) {
  Trace trace;
  const nlohmann::json& other = file.at("otherData");
  trace.start_micros = other.at("start_time_since_epoch_in_micros").get<int64_t>();
  trace.rank = other.at("rank").get<int>();
  std::map<int, std::string> names;  // pid -> tensor
  struct Track {
    std::vector<Span> stack;  // open spans, outermost first
    double last_ts = 0;
  };
  std::map<std::pair<int, int>, Track> tracks;
  for (const nlohmann::json& event : file.at("traceEvents")) {
    const std::string phase = event.at("ph");
    const int pid = event.at("pid");
    if (phase == "M") {
      if (event.at("name") == "process_name" && pid != 0) {
        const std::string name = event.at("args").at("name");
        if (!names.emplace(pid, name).second) {
          trace.problems.push_back("pid " + std::to_string(pid) + " named twice");
        }
        for (const auto& [other_pid, other_name] : names) {
          if (other_pid != pid && other_name == name) {
            trace.problems.push_back("'" + name + "' has two pids");
          }
        }
      }
      continue;
    }
    const int tid = event.at("tid");
    const double ts = event.at("ts");
    trace.last_ts = std::max(trace.last_ts, ts);
    Track& track = tracks[{pid, tid}];
    const std::string where = "pid " + std::to_string(pid) + " tid " + std::to_string(tid);
    if (ts < track.last_ts) trace.problems.push_back(where + ": time goes back");
    track.last_ts = ts;
    if (phase == "i") {
      const std::string name = event.at("name");
      if (pid == 0 && name == "CYCLE_START") {
        ++trace.cycle_marks;
      } else if (pid != 0 && !name.empty() &&
                 name.find_first_not_of("0123456789") == std::string::npos &&
                 event.value("s", "") == "t") {
        trace.ready[names[pid]].push_back(std::stoi(name));
        trace.ready_at[names[pid]].emplace_back(std::stoi(name), ts);
      } else {
        trace.problems.push_back(where + ": unexpected instant event");
      }
    } else if (phase == "B") {
      if (names.count(pid) == 0) trace.problems.push_back(where + ": span before its name");
      Span span;
      span.name = event.at("name");
      span.begin = ts;
      span.args = event.value("args", nlohmann::json::object());
      track.stack.push_back(span);
    } else if (phase == "E") {
      if (track.stack.empty()) {
        trace.problems.push_back(where + ": end without begin");
        continue;
      }
      Span span = track.stack.back();
      track.stack.pop_back();
      span.end = ts;
      if (track.stack.empty()) {
        trace.spans[names[pid]].push_back(span);
      } else {
        track.stack.back().children.push_back(span);
      }
    } else {
      trace.problems.push_back(where + ": unexpected phase " + phase);
    }
  }
  for (const auto& [key, track] : tracks) {
    if (!track.stack.empty()) trace.problems.push_back("a span left open");
  }
  return trace;
}

// The spans' names, as "[A,B]".
inline std::string span_names(const std::vector<Span>& spans) {
  std::string text;
  for (const Span& span : spans) text += (text.empty() ? "" : ",") + span.name;
  return "[" + text + "]";
}

// `tensor`'s track is its negotiation, its wait in the queue, then its
// operation, with `bytes` put in by this rank; returns the operation's nested
// spans.
inline std::vector<Span> check_tensor(Recorder& rec, const Trace& trace, const std::string& tensor,
                                      const std::string& operation, int64_t bytes) {
  const std::string case_name = "track of " + tensor;
  const auto found = trace.spans.find(tensor);
  if (found == trace.spans.end()) {
    rec.fail(case_name, "no spans");
    return {};
  }
  const std::vector<Span>& spans = found->second;
  if (!rec.check(spans.size() == 3 && spans[0].name == "NEGOTIATE_" + operation &&
                     spans[1].name == "QUEUE" && spans[2].name == operation,
                 case_name,
                 "expected [NEGOTIATE_" + operation + ",QUEUE," + operation + "], got " +
                     span_names(spans))) {
    return {};
  }
  rec.check(spans[0].children.empty() && spans[1].children.empty(), case_name,
            "the negotiation or the queue holds spans");
  rec.check(spans[2].args.value("bytes", int64_t{-1}) == bytes, case_name,
            "bytes " + spans[2].args.dump() + ", expected " + std::to_string(bytes));
  return spans[2].children;
}

// Inside an allreduce: copies into and out of the fusion buffer around
// exactly one algorithm (`algorithm`, or any when empty).
inline void check_allreduce_inside(Recorder& rec, const std::string& tensor,
                                   const std::vector<Span>& inside, const std::string& algorithm) {
  std::vector<std::string> names;
  for (const Span& span : inside) names.push_back(span.name);
  std::string reduction;
  if (names.size() == 1) {
    reduction = names[0];
  } else if (names.size() == 3 && names[0] == "MEMCPY_IN_FUSION_BUFFER" &&
             names[2] == "MEMCPY_OUT_FUSION_BUFFER") {
    reduction = names[1];
  }
  const bool ok =
      algorithm.empty() ? kAllreduceAlgorithms.count(reduction) == 1 : reduction == algorithm;
  rec.check(ok, "inside " + tensor,
            "got " + span_names(inside) + ", expected one " +
                (algorithm.empty() ? std::string("allreduce algorithm") : algorithm) +
                ", between fusion-buffer copies if any");
  for (const Span& span : inside) {
    rec.check(span.children.empty(), "inside " + tensor, span.name + " holds spans");
  }
}

// A directory every rank uses, made by rank 0 (which removes it at the end).
inline std::string shared_directory(int rank) {
  char path[64] = {};
  if (rank == 0) {
    std::snprintf(path, sizeof path, "/tmp/herd_timeline_XXXXXX");
    if (mkdtemp(path) == nullptr) path[0] = '\0';
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

}  // namespace herd_test
