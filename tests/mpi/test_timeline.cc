// Multi-rank test of the timeline (herd::start_timeline, HERD_TIMELINE;
// docs/timeline.md) through the whole runtime.
//
// Each rank writes its own file ("%r"), runs allreduces, an allgather, a
// broadcast, an alltoall, a reducescatter and a grouped allreduce, stops, and
// parses its file as JSON: the header's clock reading lies between the test's
// own readings around the start, every submitted name has one track, spans
// nest on every track with timestamps that never go back, and each tensor's
// track holds exactly its negotiation, its queue, then its operation, with
// the bytes this rank put in and, inside it, exactly its algorithm (for an
// allreduce or a group, among the copies into and out of the fusion buffer);
// rank 0's tracks carry one readiness mark per rank, the others' none. A
// restart with a new path finishes the first file; the same path twice keeps
// writing; stopping twice is harmless; a path without "%r" is rank 0's alone;
// a file that cannot be opened throws; and herd::shutdown finishes a running
// timeline, closing the negotiation of a tensor that never ran.
//
// Modes (argv[1]): "api" (the above); "env <path>": HERD_TIMELINE=<path> and
// HERD_TIMELINE_MARK_CYCLES=1 are set by ctest, and the file must hold the
// operations from init on with cycle marks; "bad_env": HERD_TIMELINE names a
// missing directory, and init must fail on every rank, naming it;
// "stragglers <herd-timeline>" and "step": see run_stragglers and run_step;
// "failed_init <path>": HERD_TIMELINE=<path> opens, then HERD_NUM_SERVERS=2 (no
// worker left) fails init, and the file must be finished (valid JSON). An optional
// "algorithms <small> <large>" names the allreduce algorithm expected for a
// 12-byte and a 128 KiB tensor (ctest fixes HERD_ALLREDUCE_ALGORITHM there).
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/herd_bench/model_shapes.h"
#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tools/timeline/merge.h"
#include "tools/timeline/stragglers.h"
#include "tools/timeline/trace_files.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using json = nlohmann::json;
using namespace herd_test;
namespace herd_tool = herd::timeline_tool;

const std::set<std::string> kAllreduceAlgorithms = {"SHM_ALLREDUCE", "RING_ALLREDUCE",
                                                    "RECURSIVE_DOUBLING_ALLREDUCE"};

int64_t micros_since_epoch() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string rank_path(std::string pattern, int rank) {
  const std::size_t at = pattern.find("%r");
  if (at != std::string::npos) pattern.replace(at, 2, std::to_string(rank));
  return pattern;
}

// The file parsed as JSON; a failure (no file, not JSON) is recorded and
// gives null.
json parse_file(Recorder& rec, const std::string& case_name, const std::string& path) {
  std::ifstream in(path);
  if (!in.good()) {
    rec.fail(case_name, "cannot read " + path);
    return json();
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::exception& e) {
    rec.fail(case_name, path + " is not valid JSON: " + e.what());
    return json();
  }
}

// One span of a track, with the spans nested in it.
struct Span {
  std::string name;
  double begin = 0;
  double end = 0;
  json args;
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

Trace read_trace(const json& file) {
  Trace trace;
  const json& other = file.at("otherData");
  trace.start_micros = other.at("start_time_since_epoch_in_micros").get<int64_t>();
  trace.rank = other.at("rank").get<int>();
  std::map<int, std::string> names;  // pid -> tensor
  struct Track {
    std::vector<Span> stack;  // open spans, outermost first
    double last_ts = 0;
  };
  std::map<std::pair<int, int>, Track> tracks;
  for (const json& event : file.at("traceEvents")) {
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
      span.args = event.value("args", json::object());
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

std::string span_names(const std::vector<Span>& spans) {
  std::string text;
  for (const Span& span : spans) text += (text.empty() ? "" : ",") + span.name;
  return "[" + text + "]";
}

// `tensor`'s track is its negotiation, its wait in the queue, then its
// operation, with `bytes` put in by this rank; returns the operation's nested
// spans.
std::vector<Span> check_tensor(Recorder& rec, const Trace& trace, const std::string& tensor,
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
void check_allreduce_inside(Recorder& rec, const std::string& tensor,
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

// Runs one of each collective under names prefixed by `prefix`; returns the
// bytes this rank put into each, by tensor name and operation.
struct Submitted {
  std::string operation;
  int64_t bytes;
};
std::map<std::string, Submitted> run_collectives(Recorder& rec, const std::string& prefix, int rank,
                                                 int size) {
  std::map<std::string, Submitted> submitted;
  try {
    std::vector<float> small = {1.0f, 2.0f, 3.0f};
    herd::TensorView small_view{small.data(), DataType::kFloat32, {3}};
    herd::allreduce(prefix + "small", small_view, small_view, ReduceOp::kSum);
    submitted[prefix + "small"] = {"ALLREDUCE", 12};
    std::vector<float> large(32768, 1.0f);
    herd::TensorView large_view{large.data(), DataType::kFloat32, {32768}};
    herd::allreduce(prefix + "large", large_view, large_view, ReduceOp::kSum);
    submitted[prefix + "large"] = {"ALLREDUCE", 131072};
    rec.check(small[2] == 3.0f * size && large[0] == static_cast<float>(size), prefix + "sums",
              "allreduce results are wrong");

    std::vector<int32_t> rows(static_cast<std::size_t>(2 * (rank + 1)), rank);
    herd::Tensor gathered;
    herd::allgather(prefix + "gather", {rows.data(), DataType::kInt32, {rank + 1, 2}}, &gathered);
    submitted[prefix + "gather"] = {"ALLGATHER", 8 * (rank + 1)};

    std::vector<double> value(4, rank);
    herd::broadcast(prefix + "bcast", {value.data(), DataType::kFloat64, {4}}, 0);
    submitted[prefix + "bcast"] = {"BROADCAST", 32};

    std::vector<int64_t> exchanged(static_cast<std::size_t>(size), rank);
    herd::Tensor received;
    herd::alltoall(prefix + "alltoall", {exchanged.data(), DataType::kInt64, {size}}, {},
                   &received);
    submitted[prefix + "alltoall"] = {"ALLTOALL", 8 * size};

    std::vector<float> scattered(static_cast<std::size_t>(2 * size), 1.0f);
    herd::Tensor part;
    herd::reducescatter(prefix + "scatter", {scattered.data(), DataType::kFloat32, {size, 2}},
                        &part, ReduceOp::kSum);
    submitted[prefix + "scatter"] = {"REDUCESCATTER", 8 * size};

    // One row for the group, named after its members; 12 + 20 bytes.
    std::vector<float> first(3, 1.0f);
    std::vector<float> second(5, 1.0f);
    const std::vector<herd::TensorView> group = {{first.data(), DataType::kFloat32, {3}},
                                                 {second.data(), DataType::kFloat32, {5}}};
    herd::grouped_allreduce({prefix + "g0", prefix + "g1"}, group, group, ReduceOp::kSum);
    submitted["{" + prefix + "g0, " + prefix + "g1}"] = {"GROUPED_ALLREDUCE", 32};
  } catch (const herd::Error& e) {
    rec.fail(prefix + "collectives", std::string("threw: ") + e.what());
  }
  return submitted;
}

// Every submitted tensor has its track; inside each allreduce, the expected
// algorithm for the small and the large one (any, when not given).
void check_collectives(Recorder& rec, const Trace& trace,
                       const std::map<std::string, Submitted>& submitted,
                       const std::string& small_algorithm, const std::string& large_algorithm) {
  // Each name is new, so rank 0's coordinator learned of each rank's request,
  // once; the other ranks know of none (nothing came from the cache).
  std::vector<int> every_rank;
  for (int r = 0; r < herd::size(); ++r) every_rank.push_back(r);
  for (const auto& [name, what] : submitted) {
    const auto found = trace.ready.find(name);
    std::vector<int> marks = found == trace.ready.end() ? std::vector<int>{} : found->second;
    std::sort(marks.begin(), marks.end());
    rec.check(marks == (trace.rank == 0 ? every_rank : std::vector<int>{}), "readiness of " + name,
              std::to_string(marks.size()) + " mark(s) on rank " + std::to_string(trace.rank));
  }
  for (const auto& [name, what] : submitted) {
    const std::vector<Span> inside = check_tensor(rec, trace, name, what.operation, what.bytes);
    if (what.operation == "ALLREDUCE") {
      const bool small = name.size() >= 5 && name.compare(name.size() - 5, 5, "small") == 0;
      check_allreduce_inside(rec, name, inside, small ? small_algorithm : large_algorithm);
    } else if (what.operation == "GROUPED_ALLREDUCE") {
      check_allreduce_inside(rec, name, inside, "");
    } else {
      // The other collectives' algorithm, alone.
      const std::map<std::string, std::string> algorithm = {
          {"ALLGATHER", "RING_ALLGATHER"},
          {"BROADCAST", "TREE_BROADCAST"},
          {"ALLTOALL", "PAIRWISE_ALLTOALL"},
          {"REDUCESCATTER", "RING_REDUCESCATTER"}};
      rec.check(
          inside.size() == 1 && inside[0].name == algorithm.at(what.operation), "inside " + name,
          "holds " + span_names(inside) + ", expected [" + algorithm.at(what.operation) + "]");
    }
  }
}

void check_structure(Recorder& rec, const std::string& case_name, const Trace& trace, int rank,
                     int64_t started_after, int64_t started_before, int64_t stopped_after) {
  for (const std::string& problem : trace.problems) rec.fail(case_name, problem);
  rec.check(trace.rank == rank, case_name, "otherData.rank is " + std::to_string(trace.rank));
  rec.check(trace.start_micros >= started_after && trace.start_micros <= started_before, case_name,
            "start_time_since_epoch_in_micros " + std::to_string(trace.start_micros) +
                " is not between " + std::to_string(started_after) + " and " +
                std::to_string(started_before));
  // Clock alignment: no event after the stop, counted from that start.
  const double span_micros = static_cast<double>(stopped_after - started_after);
  rec.check(trace.last_ts <= span_micros, case_name,
            "an event at " + std::to_string(trace.last_ts) + " us, after the stop at " +
                std::to_string(span_micros) + " us");
}

// A directory every rank uses, made by rank 0 (which removes it at the end).
std::string shared_directory(int rank) {
  char path[64] = {};
  if (rank == 0) {
    std::snprintf(path, sizeof path, "/tmp/herd_timeline_XXXXXX");
    if (mkdtemp(path) == nullptr) path[0] = '\0';
  }
  MPI_Bcast(path, sizeof path, MPI_CHAR, 0, MPI_COMM_WORLD);
  return path;
}

bool file_exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

int run_api(int rank, int size, const std::string& small_algorithm,
            const std::string& large_algorithm) {
  Recorder rec("test_timeline", rank);
  const std::string dir = shared_directory(rank);
  if (dir.empty()) {
    rec.fail("setup", "mkdtemp failed on rank 0");
    return rec.finish();
  }
  std::vector<std::string> written;

  // 1. One file per rank, with cycle marks.
  {
    const std::string pattern = dir + "/main.%r.json";
    const int64_t before = micros_since_epoch();
    herd::start_timeline(pattern, true);
    const int64_t after = micros_since_epoch();
    const auto submitted = run_collectives(rec, "tl.", rank, size);
    herd::stop_timeline();
    const int64_t stopped = micros_since_epoch();
    const std::string path = rank_path(pattern, rank);
    written.push_back(path);
    const json file = parse_file(rec, "per-rank file", path);
    if (!file.is_null()) {
      const Trace trace = read_trace(file);
      check_structure(rec, "per-rank file", trace, rank, before, after, stopped);
      check_collectives(rec, trace, submitted, small_algorithm, large_algorithm);
      rec.check(trace.spans.size() == submitted.size(), "per-rank file",
                std::to_string(trace.spans.size()) + " tensors, expected " +
                    std::to_string(submitted.size()));
      rec.check(trace.cycle_marks > 0, "per-rank file", "no CYCLE_START with mark_cycles");
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      for (int r = 0; r < size; ++r) {
        rec.check(file_exists(rank_path(pattern, r)), "per-rank file",
                  "no file " + rank_path(pattern, r));
      }
    }
  }

  // 2. A restart with a new path, the same path again, two stops.
  {
    const std::string first = dir + "/first.%r.json";
    const std::string second = dir + "/second.%r.json";
    std::vector<float> data(3, 1.0f);
    herd::TensorView view{data.data(), DataType::kFloat32, {3}};
    try {
      herd::start_timeline(first);
      herd::allreduce("restart.x", view, view, ReduceOp::kSum);
      herd::start_timeline(second);
      herd::allreduce("restart.y", view, view, ReduceOp::kSum);
      herd::start_timeline(second);
      herd::allreduce("restart.z", view, view, ReduceOp::kSum);
      herd::stop_timeline();
      herd::stop_timeline();
      rec.pass();
    } catch (const herd::Error& e) {
      rec.fail("restart", std::string("threw: ") + e.what());
    }
    written.push_back(rank_path(first, rank));
    written.push_back(rank_path(second, rank));
    const json one = parse_file(rec, "restart, first file", rank_path(first, rank));
    const json two = parse_file(rec, "restart, second file", rank_path(second, rank));
    if (!one.is_null() && !two.is_null()) {
      const Trace a = read_trace(one);
      const Trace b = read_trace(two);
      for (const std::string& problem : a.problems) rec.fail("restart, first file", problem);
      for (const std::string& problem : b.problems) rec.fail("restart, second file", problem);
      std::vector<std::string> in_a;
      std::vector<std::string> in_b;
      for (const auto& [name, spans] : a.spans) in_a.push_back(name);
      for (const auto& [name, spans] : b.spans) in_b.push_back(name);
      rec.check(in_a == std::vector<std::string>{"restart.x"}, "restart, first file",
                "tensors other than restart.x");
      rec.check(in_b == std::vector<std::string>{"restart.y", "restart.z"}, "restart, second file",
                "tensors other than restart.y and restart.z");
      check_tensor(rec, b, "restart.z", "ALLREDUCE", 12);
      rec.check(a.cycle_marks == 0 && b.cycle_marks == 0, "restart",
                "cycle marks without mark_cycles");
    }
  }

  // 3. Without %r only rank 0 writes.
  {
    const std::string shared = dir + "/shared.json";
    std::vector<float> data(3, 1.0f);
    herd::TensorView view{data.data(), DataType::kFloat32, {3}};
    herd::start_timeline(shared);
    herd::allreduce("shared.x", view, view, ReduceOp::kSum);
    herd::stop_timeline();
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
      written.push_back(shared);
      const json file = parse_file(rec, "rank 0 alone", shared);
      if (!file.is_null()) {
        const Trace trace = read_trace(file);
        rec.check(trace.rank == 0 && trace.problems.empty(), "rank 0 alone",
                  "the file is not rank 0's alone");
        check_tensor(rec, trace, "shared.x", "ALLREDUCE", 12);
      }
    }
  }

  // 4. Paths that cannot be written.
  {
    const std::string missing = dir + "/missing/t.%r.json";
    try {
      herd::start_timeline(missing);
      rec.fail("missing directory", "start_timeline did not throw");
    } catch (const herd::Error& e) {
      const std::string expected = "herd::start_timeline: cannot open '" +
                                   rank_path(missing, rank) +
                                   "' for writing: No such file or directory";
      rec.check(e.what() == expected && e.kind() == herd::ErrorKind::kFailed, "missing directory",
                std::string("threw \"") + e.what() + "\"");
    }
    try {
      herd::start_timeline("");
      rec.fail("empty path", "start_timeline did not throw");
    } catch (const herd::Error& e) {
      rec.check(e.kind() == herd::ErrorKind::kInvalidArgument &&
                    std::string(e.what()) == "herd::start_timeline: the file path is empty",
                "empty path", std::string("threw \"") + e.what() + "\"");
    }
  }

  // 5. herd::shutdown finishes a running timeline; a tensor no other rank
  // submits fails at the shutdown, its negotiation closed.
  const std::string last = dir + "/last.%r.json";
  const std::string orphan = "orphan.rank" + std::to_string(rank);
  herd::Handle orphan_handle;
  std::vector<float> orphan_data(3, 1.0f);
  try {
    herd::start_timeline(last);
    std::vector<float> data(3, 1.0f);
    herd::TensorView view{data.data(), DataType::kFloat32, {3}};
    herd::allreduce("last.x", view, view, ReduceOp::kSum);
    if (size > 1) {
      herd::TensorView orphan_view{orphan_data.data(), DataType::kFloat32, {3}};
      orphan_handle = herd::allreduce_async(orphan, orphan_view, orphan_view, ReduceOp::kSum);
    }
  } catch (const herd::Error& e) {
    rec.fail("shutdown", std::string("threw: ") + e.what());
  }
  // Every rank's checks above, which use MPI, end before the first shutdown.
  MPI_Barrier(MPI_COMM_WORLD);
  herd::shutdown();  // finalizes MPI: from here on each rank judges alone
  written.push_back(rank_path(last, rank));
  const json file = parse_file(rec, "shutdown", rank_path(last, rank));
  if (!file.is_null()) {
    const Trace trace = read_trace(file);
    for (const std::string& problem : trace.problems) rec.fail("shutdown", problem);
    check_tensor(rec, trace, "last.x", "ALLREDUCE", 12);
    if (size > 1) {
      const auto found = trace.spans.find(orphan);
      rec.check(found != trace.spans.end() && found->second.size() == 1 &&
                    found->second[0].name == "NEGOTIATE_ALLREDUCE",
                "shutdown", "the orphan's track is not one NEGOTIATE_ALLREDUCE");
    }
  }
  if (orphan_handle.valid()) {
    try {
      herd::wait(orphan_handle);
      rec.fail("shutdown", "the orphan completed");
    } catch (const herd::Error&) {
      rec.pass();
    }
  }
  for (const std::string& path : written) std::remove(path.c_str());
  if (rank == 0) {
    // The other ranks' files of the first part, then the directory; a rank
    // still removing its own leaves it, which only costs an empty directory.
    for (int r = 1; r < size; ++r) std::remove(rank_path(dir + "/main.%r.json", r).c_str());
    rmdir(dir.c_str());
  }
  return rec.finish();
}

// HERD_TIMELINE=<pattern> and HERD_TIMELINE_MARK_CYCLES=1, set by ctest.
// Where `marks` hold `rank`'s marks, by time.
std::vector<double> marks_of(const std::vector<std::pair<int, double>>& marks, int rank) {
  std::vector<double> times;
  for (const auto& [marked, at] : marks) {
    if (marked == rank) times.push_back(at);
  }
  return times;
}

// The ends of the NEGOTIATE_* spans of process `pid` in a merged trace.
std::vector<double> negotiation_ends(const json& merged, int64_t pid) {
  std::vector<double> ends;
  int depth = 0;
  bool negotiating = false;
  for (const json& event : merged.at("traceEvents")) {
    if (event.value("pid", int64_t{-1}) != pid) continue;
    const std::string phase = event.at("ph");
    if (phase == "B") {
      if (depth++ == 0)
        negotiating = event.at("name").get<std::string>().rfind("NEGOTIATE_", 0) == 0;
    } else if (phase == "E" && --depth == 0 && negotiating) {
      ends.push_back(event.at("ts").get<double>());
    }
  }
  return ends;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// "stragglers <herd-timeline>", 2 ranks: rank 1 starts its timeline later
// than rank 0, and sleeps before each submission of one tensor. The straggler
// report names rank 1 last every time and rank 0's wait close to the sleep;
// the merge aligns the two files, so the negotiations end together on the
// common clock; rank 0's file marks each rank's readiness once per
// submission, rank 1 the sleep later; rank 1's file marks them for the
// submissions the response cache settled. The herd-timeline program prints
// the same verdict and writes a merged trace that parses.
int run_stragglers(int rank, int size, const std::string& tool) {
  Recorder rec("test_timeline stragglers", rank);
  constexpr int kSleepMs = 300;
  constexpr int kStartGapMs = 200;
  constexpr int kSubmissions = 3;
  if (!rec.check(size == 2, "setup", "runs at 2 ranks")) return rec.finish();
  const std::string dir = shared_directory(rank);
  const std::string pattern = dir + "/s.%r.json";
  const std::vector<std::string> paths = {dir + "/s.0.json", dir + "/s.1.json"};
  try {
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(kStartGapMs));
    herd::start_timeline(pattern);
    std::vector<float> values(1024, 1.0f);
    herd::TensorView view{values.data(), DataType::kFloat32, {1024}};
    for (int i = 0; i < 3; ++i) herd::allreduce("warm", view, view, ReduceOp::kSum);
    for (int i = 0; i < kSubmissions; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(kSleepMs));
      herd::allreduce("straggle.x", view, view, ReduceOp::kSum);
    }
    herd::stop_timeline();
  } catch (const herd::Error& e) {
    rec.fail("run", std::string("threw: ") + e.what());
  }
  MPI_Barrier(MPI_COMM_WORLD);

  // Each rank's own marks.
  const json own = parse_file(rec, "own file", paths[static_cast<std::size_t>(rank)]);
  if (!own.is_null()) {
    const Trace trace = read_trace(own);
    for (const std::string& problem : trace.problems) rec.fail("own file", problem);
    const auto found_marks = trace.ready_at.find("straggle.x");
    const std::vector<std::pair<int, double>> marks = found_marks == trace.ready_at.end()
                                                          ? std::vector<std::pair<int, double>>{}
                                                          : found_marks->second;
    // Rank 0 hears of the first submission from its coordinator, of the
    // others from the cache's per-rank bits; rank 1 only of the latter.
    const std::size_t expected = rank == 0 ? kSubmissions : kSubmissions - 1;
    const std::vector<double> zero = marks_of(marks, 0);
    const std::vector<double> one = marks_of(marks, 1);
    rec.check(zero.size() == expected && one.size() == expected, "readiness marks",
              "rank 0 marked " + std::to_string(zero.size()) + " time(s), rank 1 " +
                  std::to_string(one.size()) + ", expected " + std::to_string(expected));
    const auto found_spans = trace.spans.find("straggle.x");
    const std::vector<Span> spans =
        found_spans == trace.spans.end() ? std::vector<Span>{} : found_spans->second;
    if (rank == 0 && one.size() == kSubmissions && spans.size() == 3 * kSubmissions) {
      for (int i = 0; i < kSubmissions; ++i) {
        const Span& negotiation = spans[3 * static_cast<std::size_t>(i)];
        const double late_ms = (one[i] - negotiation.begin) / 1000.0;
        rec.check(late_ms >= kSleepMs - 50 && one[i] <= negotiation.end, "readiness marks",
                  "rank 1 marked " + std::to_string(late_ms) +
                      " ms after rank 0's submission, or after the agreement");
      }
    }
  }

  if (rank == 0) {
    try {
      const std::vector<herd_tool::RankTrace> traces = herd_tool::read_rank_traces(paths);
      const int64_t shift = traces[1].start_micros - traces[0].start_micros;
      rec.check(shift >= (kStartGapMs - 50) * 1000, "files' starts",
                "rank 1's file started only " + std::to_string(shift) + " us after rank 0's");

      const herd_tool::StragglerReport report = herd_tool::find_stragglers(traces);
      const herd_tool::TensorStragglers* straggle = nullptr;
      for (const auto& tensor : report.tensors) {
        if (tensor.tensor == "straggle.x") straggle = &tensor;
      }
      if (rec.check(straggle != nullptr, "report", "no straggle.x")) {
        rec.check(straggle->occurrences == kSubmissions &&
                      straggle->times_last == std::vector<int>{0, kSubmissions},
                  "report", "rank 1 is not last at every submission");
        rec.check(straggle->mean_wait_ms[0] >= kSleepMs - 50 &&
                      straggle->mean_wait_ms[0] <= kSleepMs + 1000 &&
                      straggle->mean_wait_ms[1] == 0.0,
                  "report",
                  "waits " + std::to_string(straggle->mean_wait_ms[0]) + " and " +
                      std::to_string(straggle->mean_wait_ms[1]) + " ms, expected about " +
                      std::to_string(kSleepMs) + " and 0");
      }

      // One clock: the negotiation ends together on both ranks, where the
      // files' own timestamps lie the start's shift apart.
      const json merged = herd_tool::merge_traces(traces);
      int64_t pids[2] = {-1, -1};
      for (const json& event : merged.at("traceEvents")) {
        if (event.at("ph") != "M" || event.at("name") != "process_name") continue;
        const std::string name = event.at("args").at("name");
        if (name == "rank 0: straggle.x") pids[0] = event.at("pid");
        if (name == "rank 1: straggle.x") pids[1] = event.at("pid");
      }
      const std::vector<double> ends0 = negotiation_ends(merged, pids[0]);
      const std::vector<double> ends1 = negotiation_ends(merged, pids[1]);
      if (rec.check(ends0.size() == kSubmissions && ends1.size() == kSubmissions, "merge",
                    "negotiations of straggle.x: " + std::to_string(ends0.size()) + " and " +
                        std::to_string(ends1.size()))) {
        for (int i = 0; i < kSubmissions; ++i) {
          rec.check(std::abs(ends0[i] - ends1[i]) < 50'000, "merge",
                    "agreement at " + std::to_string(ends0[i]) + " us on rank 0 and " +
                        std::to_string(ends1[i]) + " us on rank 1");
        }
      }

      // The program: the same verdict, and a merged file that parses.
      const std::string report_path = dir + "/report.txt";
      const std::string merged_path = dir + "/merged.json";
      const int reported = std::system(
          (tool + " stragglers " + paths[0] + " " + paths[1] + " > " + report_path).c_str());
      const std::string text = read_text(report_path);
      rec.check(reported == 0 && text.find("most often last: rank 1") != std::string::npos &&
                    text.find("straggle.x") != std::string::npos,
                "herd-timeline stragglers", "exit " + std::to_string(reported) + ": " + text);
      const int merged_exit = std::system(
          (tool + " merge -o " + merged_path + " " + paths[0] + " " + paths[1] + " > /dev/null")
              .c_str());
      const json from_tool = parse_file(rec, "herd-timeline merge", merged_path);
      rec.check(merged_exit == 0 && !from_tool.is_null() &&
                    from_tool.at("traceEvents").size() == merged.at("traceEvents").size(),
                "herd-timeline merge", "exit " + std::to_string(merged_exit));
      // A file that is not there: exit 1, naming it.
      const std::string error_path = dir + "/error.txt";
      const std::string missing = dir + "/missing.json";
      const int failed_exit = std::system(
          (tool + " stragglers " + paths[0] + " " + missing + " 2> " + error_path).c_str());
      const std::string error = read_text(error_path);
      rec.check(failed_exit != 0 && error.find("herd-timeline: cannot read " + missing) == 0,
                "herd-timeline on a missing file",
                "exit " + std::to_string(failed_exit) + ": " + error);
      std::remove(report_path.c_str());
      std::remove(merged_path.c_str());
      std::remove(error_path.c_str());
    } catch (const std::exception& e) {
      rec.fail("report", std::string("threw: ") + e.what());
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    for (const std::string& path : paths) std::remove(path.c_str());
    rmdir(dir.c_str());
  }
  herd::shutdown();
  return rec.finish();
}

// "step": a ResNet-50 step's 161 gradients, submitted in backward order and
// reduced twice, each rank writing its file: every gradient's track holds,
// for each step, its negotiation, its queue and its allreduce with this
// rank's bytes and one algorithm among the fusion buffer's copies; rank 0
// marks each rank's readiness in both steps, the other ranks in the second,
// which the response cache settles. Then one Adasum allreduce, whose
// operation holds ADASUM_ALLREDUCE.
int run_step(int rank, int size) {
  Recorder rec("test_timeline step", rank);
  const std::string dir = shared_directory(rank);
  const std::string pattern = dir + "/step.%r.json";
  const std::vector<herd::bench::ParameterTensor> parameters = herd::bench::resnet50_parameters();
  constexpr int kSteps = 2;
  try {
    std::vector<std::vector<float>> gradients;
    for (const auto& parameter : parameters) {
      gradients.emplace_back(static_cast<std::size_t>(parameter.num_elements()), 1.0f);
    }
    herd::start_timeline(pattern);
    for (int step = 0; step < kSteps; ++step) {
      std::vector<herd::Handle> handles;
      for (std::size_t i = parameters.size(); i-- > 0;) {
        herd::TensorView view{gradients[i].data(), DataType::kFloat32, parameters[i].shape};
        handles.push_back(
            herd::allreduce_async("grad." + parameters[i].name, view, view, ReduceOp::kAverage));
      }
      for (const herd::Handle& handle : handles) herd::wait(handle);
    }
    // Adasum, at the 2 ranks this mode runs (a power of two).
    std::vector<float> adasum(16, 1.0f);
    herd::TensorView adasum_view{adasum.data(), DataType::kFloat32, {16}};
    herd::allreduce("adasum.x", adasum_view, adasum_view, ReduceOp::kAdasum);
    herd::stop_timeline();
  } catch (const herd::Error& e) {
    rec.fail("run", std::string("threw: ") + e.what());
  }
  const std::string path = rank_path(pattern, rank);
  const json file = parse_file(rec, "step file", path);
  if (!file.is_null()) {
    const Trace trace = read_trace(file);
    for (const std::string& problem : trace.problems) rec.fail("step file", problem);
    std::vector<int> expected_marks;
    for (int r = 0; r < size; ++r) {
      for (int step = rank == 0 ? 0 : 1; step < kSteps; ++step) expected_marks.push_back(r);
    }
    std::sort(expected_marks.begin(), expected_marks.end());
    for (const auto& parameter : parameters) {
      const std::string name = "grad." + parameter.name;
      const auto found = trace.spans.find(name);
      if (!rec.check(found != trace.spans.end() && found->second.size() == 3 * kSteps, name,
                     "not " + std::to_string(3 * kSteps) + " top-level spans")) {
        continue;
      }
      for (int step = 0; step < kSteps; ++step) {
        Trace one_step;
        one_step.spans[name].assign(found->second.begin() + 3 * step,
                                    found->second.begin() + 3 * step + 3);
        const std::vector<Span> inside =
            check_tensor(rec, one_step, name, "ALLREDUCE", parameter.num_elements() * 4);
        check_allreduce_inside(rec, name, inside, "");
      }
      const auto found_marks = trace.ready.find(name);
      std::vector<int> marks =
          found_marks == trace.ready.end() ? std::vector<int>{} : found_marks->second;
      std::sort(marks.begin(), marks.end());
      rec.check(marks == expected_marks, "readiness of " + name,
                std::to_string(marks.size()) + " mark(s)");
    }
  }
  if (!file.is_null()) {
    const std::vector<Span> inside =
        check_tensor(rec, read_trace(file), "adasum.x", "ALLREDUCE", 64);
    rec.check(inside.size() == 1 && inside[0].name == "ADASUM_ALLREDUCE", "inside adasum.x",
              "holds " + span_names(inside));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  std::remove(path.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) rmdir(dir.c_str());
  herd::shutdown();
  return rec.finish();
}

int run_env(int rank, int size, const std::string& pattern) {
  Recorder rec("test_timeline env", rank);
  const auto submitted = run_collectives(rec, "env.", rank, size);
  // The timeline ran from init: stop it, so that the file is complete, and
  // read it while MPI still runs.
  herd::stop_timeline();
  const std::string path = rank_path(pattern, rank);
  const json file = parse_file(rec, "HERD_TIMELINE", path);
  if (!file.is_null()) {
    const Trace trace = read_trace(file);
    for (const std::string& problem : trace.problems) rec.fail("HERD_TIMELINE", problem);
    rec.check(trace.rank == rank, "HERD_TIMELINE", "otherData.rank is wrong");
    check_collectives(rec, trace, submitted, "", "");
    rec.check(trace.cycle_marks > 0, "HERD_TIMELINE", "no CYCLE_START");
  }
  std::remove(path.c_str());
  MPI_Barrier(MPI_COMM_WORLD);
  herd::shutdown();
  return rec.finish();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "api";
  if (mode == "bad_env") {
    // HERD_TIMELINE names a missing directory: init fails on every rank with
    // the same message, naming rank 0's path (and every rank's, with %r).
    try {
      herd::init();
      std::fprintf(stderr, "test_timeline: herd::init succeeded with a missing directory\n");
      herd::shutdown();
      return 1;
    } catch (const herd::Error& e) {
      const std::string message = e.what();
      const bool ok = message.find("herd::init: on rank 0, HERD_TIMELINE='") == 0 &&
                      message.find("cannot open '") != std::string::npos &&
                      message.find("No such file or directory") != std::string::npos;
      std::printf("test_timeline bad_env: %s: \"%s\"\n", ok ? "passed" : "FAILED", e.what());
      return ok ? 0 : 1;
    }
  }
  if (mode == "failed_init" && argc > 2) {
    // HERD_TIMELINE opens, then init fails (HERD_NUM_SERVERS leaves no
    // worker): the file is finished all the same. MPI is gone after the failed init, so the rank
    // comes from Open MPI's environment.
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const int rank = world_rank != nullptr ? std::atoi(world_rank) : 0;
    Recorder rec("test_timeline failed_init", rank);
    try {
      herd::init();
      rec.fail("failed init", "herd::init succeeded with a bad setting");
      herd::shutdown();
    } catch (const herd::Error& e) {
      rec.check(
          std::string(e.what()).find("HERD_NUM_SERVERS=2 leaves no worker") != std::string::npos,
          "failed init", std::string("threw \"") + e.what() + "\"");
    }
    const std::string path = rank_path(argv[2], rank);
    const json file = parse_file(rec, "failed init", path);
    if (!file.is_null()) {
      const Trace trace = read_trace(file);
      for (const std::string& problem : trace.problems) rec.fail("failed init", problem);
      rec.check(trace.rank == rank && trace.spans.empty(), "failed init",
                "not an empty timeline of this rank");
    }
    std::remove(path.c_str());
    return rec.finish();
  }
  try {
    herd::init();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "test_timeline: herd::init threw: %s\n", e.what());
    return 1;
  }
  const int rank = herd::rank();
  const int size = herd::size();
  if (mode == "env" && argc > 2) return run_env(rank, size, argv[2]);
  if (mode == "stragglers" && argc > 2) return run_stragglers(rank, size, argv[2]);
  if (mode == "step") return run_step(rank, size);
  std::string small_algorithm;
  std::string large_algorithm;
  if (argc > 4 && std::string(argv[2]) == "algorithms") {
    small_algorithm = argv[3];
    large_algorithm = argv[4];
  }
  return run_api(rank, size, small_algorithm, large_algorithm);
}
