// Multi-rank test of the allreduce algorithm's choice (src/allreduce_chooser.h,
// HERD_ALLREDUCE_ALGORITHM) through the whole runtime.
//
// Each rank writes its timeline, runs blocking allreduces of sizes in distinct
// size classes, kSums calls each (past the first probe round), interleaved,
// in place and out of place, and checks every result against exact sums of
// integers; then reads back from its timeline which algorithm ran each call.
// Every rank must have run the same algorithm for every call (rank 0's list
// is broadcast and compared). Modes (argv[1]): "auto": on one machine with
// shared memory the first three calls of each size run the three candidates
// once each, so the choice does switch between calls; "auto_noshm": the
// same with HERD_SHM_ALLREDUCE_BYTES=0, two candidates; "fixed <ACTIVITY>":
// every call ran that activity (SHM_ALLREDUCE, RING_ALLREDUCE or
// RECURSIVE_DOUBLING_ALLREDUCE), as ctest sets HERD_ALLREDUCE_ALGORITHM.
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tests/mpi/timeline_activities.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

const std::set<std::string> kAlgorithms = {"SHM_ALLREDUCE", "RING_ALLREDUCE",
                                           "RECURSIVE_DOUBLING_ALLREDUCE"};
// Past the exploration (calls 1-3) and the first probe round (19-20).
constexpr int kSums = 24;

// Element i of `rank`'s input in call `call`: small integers, so every sum
// is exact in float32.
float input_value(int rank, int call, int64_t i) {
  return static_cast<float>((rank + 1) * (call + 1) + static_cast<int>(i % 13));
}

// The algorithm activities of the file, in the order they began, as
// "tensor:ACTIVITY" (blocking calls run one at a time).
std::vector<std::string> algorithms_run(Recorder& rec, const std::string& path) {
  std::vector<std::string> runs;
  for (const TimelineActivity& run : timeline_activities(rec, path, kAlgorithms)) {
    runs.push_back(run.tensor + ":" + run.activity);
  }
  return runs;
}

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += item + "\n";
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  herd::init();
  const int rank = herd::rank();
  const int size = herd::size();
  Recorder rec("test_allreduce_choice", rank);
  const std::string mode = argc > 1 ? argv[1] : "auto";
  const std::string fixed = mode == "fixed" && argc > 2 ? argv[2] : "";
  // "%r": every rank writes its own file.
  const std::string prefix = "allreduce_choice." + std::to_string(getpid()) + ".";
  const std::string path = prefix + std::to_string(rank) + ".json";
  herd::start_timeline(prefix + "%r.json");

  // Elements of float32 per tensor: 12 B, 5000 B, 256 KiB + 4 B, 1 MiB.
  const std::vector<int64_t> counts = {3, 1250, 65537, 262144};
  for (int call = 0; call < kSums; ++call) {
    for (int64_t count : counts) {
      const std::string name = "sum." + std::to_string(count);
      std::vector<float> input(static_cast<std::size_t>(count));
      for (int64_t i = 0; i < count; ++i) input[i] = input_value(rank, call, i);
      const bool in_place = call % 2 == 1;
      std::vector<float> output(in_place ? 0 : static_cast<std::size_t>(count), -1.0f);
      float* result = in_place ? input.data() : output.data();
      herd::allreduce(name, herd::TensorView{input.data(), DataType::kFloat32, {count}},
                      herd::TensorView{result, DataType::kFloat32, {count}}, ReduceOp::kSum);
      CaseCheck check(rec, name + " call " + std::to_string(call));
      for (int64_t i = 0; i < count; ++i) {
        double expected = 0;
        for (int r = 0; r < size; ++r) expected += input_value(r, call, i);
        if (result[i] != expected) {
          check.mismatch(i, double_string(expected), double_string(result[i]));
        }
      }
    }
  }
  herd::stop_timeline();
  const std::vector<std::string> runs = algorithms_run(rec, path);
  std::remove(path.c_str());

  rec.check(runs.size() == counts.size() * kSums, "calls in the timeline",
            "expected " + std::to_string(counts.size() * kSums) + " algorithm spans, got " +
                std::to_string(runs.size()));
  // Every rank ran what rank 0 ran, call by call.
  const std::string mine = joined(runs);
  const std::string rank0 = from_rank_0(mine);
  rec.check(mine == rank0, "same algorithms as rank 0",
            "rank 0 ran\n" + rank0 + "this rank ran\n" + mine);

  if (!fixed.empty()) {
    for (const std::string& run : runs) {
      rec.check(run.substr(run.find(':') + 1) == fixed, "fixed algorithm",
                run + " where " + fixed + " is fixed");
    }
  } else if (size > 1 && herd::local_size() == size) {
    // Each size's first calls explore the candidates, one each: shared
    // memory (unless "auto_noshm"), the ring and recursive doubling.
    const std::size_t candidates = mode == "auto_noshm" ? 2 : 3;
    for (int64_t count : counts) {
      const std::string name = "sum." + std::to_string(count);
      std::vector<std::string> first;
      for (const std::string& run : runs) {
        if (run.rfind(name + ":", 0) == 0 && first.size() < candidates) {
          first.push_back(run);
        }
      }
      rec.check(std::set<std::string>(first.begin(), first.end()).size() == candidates,
                "exploration of " + name, "the first calls ran\n" + joined(first));
    }
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
