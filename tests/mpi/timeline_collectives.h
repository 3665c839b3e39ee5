// One of each collective, run under a timeline, and the check of the tracks
// they leave in its file: shared by the timeline's tests of herd::start_timeline
// (test_timeline.cc) and of HERD_TIMELINE (test_timeline_env.cc).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/mpi/timeline_trace.h"

namespace herd_test {

// Runs one of each collective under names prefixed by `prefix`; returns the
// bytes this rank put into each, by tensor name and operation.
struct Submitted {
  std::string operation;
  int64_t bytes;
};
inline std::map<std::string, Submitted> run_collectives(Recorder& rec, const std::string& prefix,
                                                        int rank, int size) {
  std::map<std::string, Submitted> submitted;
  try {
    std::vector<float> small = {1.0f, 2.0f, 3.0f};
    herd::TensorView small_view{small.data(), herd::DataType::kFloat32, {3}};
    herd::allreduce(prefix + "small", small_view, small_view, herd::ReduceOp::kSum);
    submitted[prefix + "small"] = {"ALLREDUCE", 12};
    std::vector<float> large(32768, 1.0f);
    herd::TensorView large_view{large.data(), herd::DataType::kFloat32, {32768}};
    herd::allreduce(prefix + "large", large_view, large_view, herd::ReduceOp::kSum);
    submitted[prefix + "large"] = {"ALLREDUCE", 131072};
    rec.check(small[2] == 3.0f * size && large[0] == static_cast<float>(size), prefix + "sums",
              "allreduce results are wrong");

    std::vector<int32_t> rows(static_cast<std::size_t>(2 * (rank + 1)), rank);
    herd::Tensor gathered;
    herd::allgather(prefix + "gather", {rows.data(), herd::DataType::kInt32, {rank + 1, 2}},
                    &gathered);
    submitted[prefix + "gather"] = {"ALLGATHER", 8 * (rank + 1)};

    std::vector<double> value(4, rank);
    herd::broadcast(prefix + "bcast", {value.data(), herd::DataType::kFloat64, {4}}, 0);
    submitted[prefix + "bcast"] = {"BROADCAST", 32};

    std::vector<int64_t> exchanged(static_cast<std::size_t>(size), rank);
    herd::Tensor received;
    herd::alltoall(prefix + "alltoall", {exchanged.data(), herd::DataType::kInt64, {size}}, {},
                   &received);
    submitted[prefix + "alltoall"] = {"ALLTOALL", 8 * size};

    std::vector<float> scattered(static_cast<std::size_t>(2 * size), 1.0f);
    herd::Tensor part;
    herd::reducescatter(prefix + "scatter", {scattered.data(), herd::DataType::kFloat32, {size, 2}},
                        &part, herd::ReduceOp::kSum);
    submitted[prefix + "scatter"] = {"REDUCESCATTER", 8 * size};

    // One row for the group, named after its members; 12 + 20 bytes.
    std::vector<float> first(3, 1.0f);
    std::vector<float> second(5, 1.0f);
    const std::vector<herd::TensorView> group = {{first.data(), herd::DataType::kFloat32, {3}},
                                                 {second.data(), herd::DataType::kFloat32, {5}}};
    herd::grouped_allreduce({prefix + "g0", prefix + "g1"}, group, group, herd::ReduceOp::kSum);
    submitted["{" + prefix + "g0, " + prefix + "g1}"] = {"GROUPED_ALLREDUCE", 32};
  } catch (const herd::Error& e) {
    rec.fail(prefix + "collectives", std::string("threw: ") + e.what());
  }
  return submitted;
}

// Every submitted tensor has its track; inside each allreduce, the expected
// algorithm for the small and the large one (any, when not given).
inline void check_collectives(Recorder& rec, const Trace& trace,
                              const std::map<std::string, Submitted>& submitted,
                              const std::string& small_algorithm,
                              const std::string& large_algorithm) {
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

}  // namespace herd_test
