// Multi-rank test of the timeline's readiness marks (docs/timeline.md)
// through the whole runtime, and of herd-timeline's straggler report and
// merge over the files of a real job.
//
// Modes (argv[1]): "stragglers <herd-timeline>": rank 1 late at every
// submission (see run_stragglers); "step": a ResNet-50 step's gradients, every
// phase of every one with its readiness marks (see run_step). Both run at 2
// ranks.
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/herd_bench/model_shapes.h"
#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tests/mpi/timeline_trace.h"
#include "tools/timeline/merge.h"
#include "tools/timeline/stragglers.h"
#include "tools/timeline/trace_files.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using json = nlohmann::json;
using namespace herd_test;
namespace herd_tool = herd::timeline_tool;

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
  Recorder rec("test_timeline_marks stragglers", rank);
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
  Recorder rec("test_timeline_marks step", rank);
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
    // start_timeline is not collective: without this barrier rank 1's first
    // requests can reach rank 0 before its timeline is on, and go unmarked.
    MPI_Barrier(MPI_COMM_WORLD);
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
}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    herd::init();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "test_timeline_marks: herd::init threw: %s\n", e.what());
    return 1;
  }
  const int rank = herd::rank();
  const int size = herd::size();
  if (mode == "stragglers" && argc > 2) return run_stragglers(rank, size, argv[2]);
  if (mode == "step") return run_step(rank, size);
  std::fprintf(stderr, "test_timeline_marks: unknown mode '%s'\n", mode.c_str());
  herd::shutdown();
  return 1;
}
