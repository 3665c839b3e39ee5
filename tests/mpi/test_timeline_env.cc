// Multi-rank test of HERD_TIMELINE (docs/timeline.md): the timeline that
// herd::init starts from the environment.
//
// Modes (argv[1]): "env <path>": HERD_TIMELINE=<path> and
// HERD_TIMELINE_MARK_CYCLES=1 are set by ctest, and the file must hold one of
// each collective from init on, track by track, with cycle marks; "bad_env":
// HERD_TIMELINE names a missing directory, and init must fail on every rank,
// naming it; "failed_init <path>": HERD_TIMELINE=<path> opens, then
// HERD_NUM_SERVERS=2 (no worker left) fails init, and the file must be
// finished (valid JSON).
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tests/mpi/timeline_collectives.h"
#include "tests/mpi/timeline_trace.h"

namespace {

using json = nlohmann::json;
using namespace herd_test;

// HERD_TIMELINE=<pattern> and HERD_TIMELINE_MARK_CYCLES=1, set by ctest.
int run_env(int rank, int size, const std::string& pattern) {
  Recorder rec("test_timeline_env env", rank);
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
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "bad_env") {
    // HERD_TIMELINE names a missing directory: init fails on every rank with
    // the same message, naming rank 0's path (and every rank's, with %r).
    try {
      herd::init();
      std::fprintf(stderr, "test_timeline_env: herd::init succeeded with a missing directory\n");
      herd::shutdown();
      return 1;
    } catch (const herd::Error& e) {
      const std::string message = e.what();
      const bool ok = message.find("herd::init: on rank 0, HERD_TIMELINE='") == 0 &&
                      message.find("cannot open '") != std::string::npos &&
                      message.find("No such file or directory") != std::string::npos;
      std::printf("test_timeline_env bad_env: %s: \"%s\"\n", ok ? "passed" : "FAILED", e.what());
      return ok ? 0 : 1;
    }
  }
  if (mode == "failed_init" && argc > 2) {
    // HERD_TIMELINE opens, then init fails (HERD_NUM_SERVERS leaves no
    // worker): the file is finished all the same. MPI is gone after the failed init, so the rank
    // comes from Open MPI's environment.
    const char* world_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    const int rank = world_rank != nullptr ? std::atoi(world_rank) : 0;
    Recorder rec("test_timeline_env failed_init", rank);
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
    std::fprintf(stderr, "test_timeline_env: herd::init threw: %s\n", e.what());
    return 1;
  }
  if (mode == "env" && argc > 2) return run_env(herd::rank(), herd::size(), argv[2]);
  std::fprintf(stderr, "test_timeline_env: unknown mode '%s'\n", mode.c_str());
  herd::shutdown();
  return 1;
}
