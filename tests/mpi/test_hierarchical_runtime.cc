// Multi-host test of the hierarchical CPU allreduce in the runtime
// (HERD_HIERARCHICAL_ALLREDUCE, src/process_set_state.cc, FusionExecutor),
// run by ctest on emulated hosts (scripts/emulated_hosts.py) at 2 hosts of
// 2 ranks.
//
// Every rank writes its timeline and reduces, through the public API:
// single tensors of 1 element to 8 MiB (sum and average of float32, sum and
// average of int32, in place and out of place), a fused group of small
// tensors submitted together, and order-sensitive float32 sums whose bits
// must be those of the reduction order (collectives/reduction_order.h)
// computed here: with 2 ranks per host the hierarchical allreduce and the
// flat algorithms give the same bits, so every mode checks the same
// reference. Every other result is checked against its closed form.
// Then it reads back from its timeline which algorithm ran each call and
// checks it against argv[1]:
//   on       HERD_HIERARCHICAL_ALLREDUCE=1: every call ran
//            HIERARCHICAL_ALLREDUCE;
//   off      HERD_HIERARCHICAL_ALLREDUCE=0: none did;
//   auto     the default: single tensors of 64 KiB and more ran it, smaller
//            ones a flat algorithm (HERD_ALLREDUCE_ALGORITHM=shm, the
//            default, decides by size);
//   measured HERD_ALLREDUCE_ALGORITHM=auto: each size's first calls explore
//            the hierarchical allreduce among the candidates;
//   refused  HERD_HIERARCHICAL_ALLREDUCE=1 with the ranks placed round-robin
//            over the hosts (mpirun --map-by node): none ran it, and rank 0
//            logged one warning naming the layout (read back from its own
//            stderr, redirected to a file during herd::init).
// Every rank must have run the same algorithm for every call.
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tests/mpi/timeline_activities.h"
#include "tests/unit/collectives/reduction_order_reference.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

const std::set<std::string> kAlgorithms = {
    "SHM_ALLREDUCE", "RING_ALLREDUCE", "RECURSIVE_DOUBLING_ALLREDUCE", "HIERARCHICAL_ALLREDUCE"};
const std::string kHierarchical = "HIERARCHICAL_ALLREDUCE";
// Where HERD_ALLREDUCE_ALGORITHM=shm starts taking the hierarchical
// allreduce (kHierarchicalAllreduceMinBytes, src/fusion_executor.h).
constexpr int64_t kHierarchicalMinBytes = 64 * 1024;

// Elements per tensor: 1 element to 8 MiB of 4-byte elements, odd counts
// that split unevenly into the hosts' shards, and 16 KiB elements = 64 KiB
// on both sides of the size where auto starts the hierarchical allreduce.
const std::vector<int64_t> kCounts = {1,     2,     3,      1000,        16383,
                                      16384, 65537, 262147, 1048576 + 5, 2 * 1048576};
// Calls of each single tensor: past the measured choice's exploration.
constexpr int kCalls = 5;

// One algorithm span of the timeline: the tensor and the activity.
using Run = TimelineActivity;

// Rank `rank`'s float input at i in call `call`: integers small enough that
// sums over 4 ranks are exact, and averages too (multiples of the rank count
// plus what the rank adds, which sums to a multiple of it).
float float_input(int rank, int size, int call, int64_t i) {
  return static_cast<float>(size * ((i + call) % 101) + 2 * rank);
}
double float_sum(int size, int call, int64_t i) {
  return static_cast<double>(size) * size * ((i + call) % 101) + size * (size - 1);
}
int32_t int_input(int rank, int size, int call, int64_t i) {
  return static_cast<int32_t>(size * ((i * 7 + call) % 1009) - 1000 + 2 * rank);
}
int64_t int_sum(int size, int call, int64_t i) {
  return static_cast<int64_t>(size) * (size * ((i * 7 + call) % 1009) - 1000) +
         int64_t{size} * (size - 1);
}

// One single-tensor allreduce of `count` elements, checked; its name is
// "<kind>.<count>.<call>".
void single_call(Recorder& rec, const std::string& kind, int64_t count, int call, int rank,
                 int size) {
  const std::string name = kind + "." + std::to_string(count) + "." + std::to_string(call);
  const bool in_place = call % 2 == 1;
  const bool average = kind == "favg" || kind == "iavg";
  const bool integer = kind == "isum" || kind == "iavg";
  const ReduceOp op = average ? ReduceOp::kAverage : ReduceOp::kSum;
  CaseCheck check(rec, name);
  if (integer) {
    std::vector<int32_t> input(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) input[i] = int_input(rank, size, call, i);
    std::vector<int32_t> output(in_place ? 0 : input.size(), -1);
    int32_t* result = in_place ? input.data() : output.data();
    herd::allreduce(name, herd::TensorView{input.data(), DataType::kInt32, {count}},
                    herd::TensorView{result, DataType::kInt32, {count}}, op);
    for (int64_t i = 0; i < count; ++i) {
      // The sum is a multiple of the rank count: the average is exact.
      const int64_t expected = average ? int_sum(size, call, i) / size : int_sum(size, call, i);
      if (result[i] != expected) {
        check.mismatch(i, std::to_string(expected), std::to_string(result[i]));
      }
    }
    return;
  }
  std::vector<float> input(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) input[i] = float_input(rank, size, call, i);
  std::vector<float> output(in_place ? 0 : input.size(), -1.0f);
  float* result = in_place ? input.data() : output.data();
  herd::allreduce(name, herd::TensorView{input.data(), DataType::kFloat32, {count}},
                  herd::TensorView{result, DataType::kFloat32, {count}}, op);
  for (int64_t i = 0; i < count; ++i) {
    const double expected = average ? float_sum(size, call, i) / size : float_sum(size, call, i);
    if (result[i] != expected) {
      check.mismatch(i, double_string(expected), double_string(result[i]));
    }
  }
}

// 24 tensors of 1 to 4096 float32 elements submitted together, so that the
// runtime fuses them; sums and averages alternate by tensor.
void fused_group(Recorder& rec, int round, int rank, int size) {
  constexpr int kTensors = 24;
  std::vector<std::vector<float>> inputs(kTensors);
  std::vector<std::vector<float>> outputs(kTensors);
  std::vector<herd::Handle> handles;
  for (int t = 0; t < kTensors; ++t) {
    const int64_t count = 1 + (int64_t{t} * 613) % 4096;
    for (int64_t i = 0; i < count; ++i) inputs[t].push_back(float_input(rank, size, t, i));
    outputs[t].assign(inputs[t].size(), -1.0f);
    handles.push_back(
        herd::allreduce_async("fused." + std::to_string(round) + "." + std::to_string(t),
                              herd::TensorView{inputs[t].data(), DataType::kFloat32, {count}},
                              herd::TensorView{outputs[t].data(), DataType::kFloat32, {count}},
                              t % 2 == 0 ? ReduceOp::kSum : ReduceOp::kAverage));
  }
  for (const herd::Handle& handle : handles) herd::wait(handle);
  for (int t = 0; t < kTensors; ++t) {
    CaseCheck check(rec, "fused." + std::to_string(round) + "." + std::to_string(t));
    for (std::size_t i = 0; i < outputs[t].size(); ++i) {
      const double sum = float_sum(size, t, static_cast<int64_t>(i));
      const double expected = t % 2 == 0 ? sum : sum / size;
      if (outputs[t][i] != expected) {
        check.mismatch(static_cast<int64_t>(i), double_string(expected),
                       double_string(outputs[t][i]));
      }
    }
  }
}

// Float sums whose bits depend on the order of the additions, against the
// reduction order's reference.
void order_sensitive(Recorder& rec, int64_t count, int rank, int size) {
  const std::string name = "order." + std::to_string(count);
  std::vector<float> values(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    values[i] = herd::collectives::testing::order_sensitive_value(rank, i);
  }
  herd::allreduce(name, herd::TensorView{values.data(), DataType::kFloat32, {count}},
                  herd::TensorView{values.data(), DataType::kFloat32, {count}}, ReduceOp::kSum);
  CaseCheck check(rec, name);
  for (int64_t i = 0; i < count; ++i) {
    const float expected = herd::collectives::testing::order_sensitive_sum(size, i);
    if (std::memcmp(&values[i], &expected, sizeof(float)) != 0) {
      check.mismatch(i, double_string(expected), double_string(values[i]));
    }
  }
}

// Bytes of the single tensor `tensor` ("<kind>.<count>.<call>" or
// "order.<count>"), or -1 for a fused one.
int64_t single_tensor_bytes(const std::string& tensor) {
  if (tensor.rfind("fused.", 0) == 0) return -1;
  const std::size_t first = tensor.find('.');
  const std::size_t second = tensor.find('.', first + 1);
  return 4 * std::stoll(tensor.substr(first + 1, second - first - 1));
}

std::string joined(const std::vector<Run>& runs) {
  std::string text;
  for (const Run& run : runs) text += run.tensor + ":" + run.activity + "\n";
  return text;
}

// Rank 0's herd::init with its stderr going to a file; what init wrote there
// (also copied back to the real stderr).
std::string init_capturing_stderr(const std::string& path) {
  std::fflush(stderr);
  const int saved = dup(STDERR_FILENO);
  FILE* file = std::fopen(path.c_str(), "w");
  dup2(fileno(file), STDERR_FILENO);
  herd::init();
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::fclose(file);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(path.c_str());
  std::fputs(text.str().c_str(), stderr);
  return text.str();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "auto";
  int world_rank = 0;
  {
    // Only the rank that would log the warning captures its stderr; the
    // launcher's rank tells which one before MPI starts.
    const char* launcher_rank = std::getenv("OMPI_COMM_WORLD_RANK");
    world_rank = launcher_rank != nullptr ? std::atoi(launcher_rank) : 0;
  }
  std::string init_log;
  if (world_rank == 0) {
    init_log = init_capturing_stderr("hierarchical_runtime." + std::to_string(getpid()) + ".log");
  } else {
    herd::init();
  }
  const int rank = herd::rank();
  const int size = herd::size();
  Recorder rec("test_hierarchical_runtime " + mode, rank);
  rec.check(size == 4 && herd::local_size() == 2 && herd::cross_size() == 2, "layout",
            "expected 2 hosts of 2 ranks, got size " + std::to_string(size) + ", local size " +
                std::to_string(herd::local_size()) + ", cross size " +
                std::to_string(herd::cross_size()));

  const std::string prefix = "hierarchical_runtime." + std::to_string(getpid()) + ".";
  const std::string path = prefix + std::to_string(rank) + ".json";
  herd::start_timeline(prefix + "%r.json");
  for (int call = 0; call < kCalls; ++call) {
    for (int64_t count : kCounts) {
      for (const char* kind : {"fsum", "favg", "isum", "iavg"}) {
        // The largest sizes once per kind: enough for several MiB.
        if (count > 262147 && call > 1) continue;
        single_call(rec, kind, count, call, rank, size);
      }
    }
  }
  for (int round = 0; round < 3; ++round) fused_group(rec, round, rank, size);
  for (int64_t count : {int64_t{1}, int64_t{7}, int64_t{4099}, int64_t{20011}, int64_t{300001}}) {
    order_sensitive(rec, count, rank, size);
  }
  herd::stop_timeline();
  const std::vector<Run> runs = timeline_activities(rec, path, kAlgorithms);
  std::remove(path.c_str());
  rec.check(!runs.empty(), "timeline", "no algorithm span in " + path);

  // Every rank ran what rank 0 ran, call by call.
  const std::string mine = joined(runs);
  const std::string rank0 = from_rank_0(mine);
  rec.check(mine == rank0, "same algorithms as rank 0",
            "rank 0 ran\n" + rank0 + "this rank ran\n" + mine);

  int hierarchical_runs = 0;
  for (const Run& run : runs) {
    const bool hierarchical = run.activity == kHierarchical;
    hierarchical_runs += hierarchical ? 1 : 0;
    const std::string what = run.tensor + " ran " + run.activity;
    if (mode == "on") {
      rec.check(hierarchical, "forced", what + " with HERD_HIERARCHICAL_ALLREDUCE=1");
    } else if (mode == "off" || mode == "refused") {
      rec.check(!hierarchical, "never", what + " in mode " + mode);
    } else if (mode == "auto") {
      const int64_t bytes = single_tensor_bytes(run.tensor);
      if (bytes >= 0) {
        rec.check(hierarchical == (bytes >= kHierarchicalMinBytes), "by size",
                  what + " (" + std::to_string(bytes) + " bytes) under auto");
      }
    }
  }
  if (mode == "measured") {
    // The first size class called (4 bytes: "<kind>.1.<call>") has no
    // decided neighbour, so its first three calls explore the three
    // candidates, the hierarchical allreduce among them.
    std::vector<std::string> first;
    for (const Run& run : runs) {
      if (single_tensor_bytes(run.tensor) == 4 && first.size() < 3) first.push_back(run.activity);
    }
    const std::set<std::string> explored(first.begin(), first.end());
    const std::set<std::string> candidates = {kHierarchical, "RING_ALLREDUCE",
                                              "RECURSIVE_DOUBLING_ALLREDUCE"};
    rec.check(explored == candidates, "exploration",
              "the first calls of 4 bytes did not run the three candidates:\n" + mine);
  }
  if (mode == "on" || mode == "auto" || mode == "measured") {
    rec.check(hierarchical_runs > 0, "hierarchical ran", "no call ran " + kHierarchical);
  }
  if (rank == 0) {
    // The warning names the setting and the hosts of the ranks in set
    // order, round-robin under --map-by node; in other modes there is none.
    const std::string warning = "HERD_HIERARCHICAL_ALLREDUCE=1, but its allreduces run flat";
    const bool warned = init_log.find(warning) != std::string::npos;
    const bool names_layout =
        init_log.find("host of each rank, in set order, 0,1,0,1; ranks per host 2,2") !=
        std::string::npos;
    if (mode == "refused") {
      rec.check(warned && names_layout, "layout warning",
                "herd::init's log lacks the warning naming the layout:\n" + init_log);
      std::size_t count = 0;
      for (std::size_t at = init_log.find(warning); at != std::string::npos;
           at = init_log.find(warning, at + 1)) {
        ++count;
      }
      rec.check(count == 1, "one warning", std::to_string(count) + " warnings:\n" + init_log);
    } else {
      rec.check(!warned, "no layout warning", "unexpected warning:\n" + init_log);
    }
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
