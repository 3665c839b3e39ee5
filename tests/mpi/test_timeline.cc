// Multi-rank test of herd::start_timeline and herd::stop_timeline
// (docs/timeline.md) through the whole runtime.
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
// Arguments: an optional "api algorithms <small> <large>" names the allreduce
// algorithm expected for a 12-byte and a 128 KiB tensor (ctest fixes
// HERD_ALLREDUCE_ALGORITHM there). HERD_TIMELINE is tested by
// test_timeline_env.cc, the readiness marks of a training step and of a
// straggler by test_timeline_marks.cc.
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tests/mpi/timeline_collectives.h"
#include "tests/mpi/timeline_trace.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using json = nlohmann::json;
using namespace herd_test;

int64_t micros_since_epoch() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
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

}  // namespace

int main(int argc, char** argv) {
  try {
    herd::init();
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "test_timeline: herd::init threw: %s\n", e.what());
    return 1;
  }
  const int rank = herd::rank();
  const int size = herd::size();
  std::string small_algorithm;
  std::string large_algorithm;
  if (argc > 4 && std::string(argv[2]) == "algorithms") {
    small_algorithm = argv[3];
    large_algorithm = argv[4];
  }
  return run_api(rank, size, small_algorithm, large_algorithm);
}
