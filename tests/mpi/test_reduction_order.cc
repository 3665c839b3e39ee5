// Multi-rank test: an allreduce's bits depend only on the ranks' inputs, not
// on how the runtime fused the tensors or which algorithm ran.
//
// Every rank reduces the same float32 tensors (1 element up to 300001, so
// that one buffer takes recursive doubling, the ring and, on one machine,
// the shared-memory allreduce, alone or fused) in four ways: all submitted
// at once (fused as they happen to arrive), as one grouped allreduce, one
// at a time (never fused), and in a random order of each rank's own. Sums
// must have, at every index, the bits of the reduction order
// (collectives/reduction_order.h) computed here from every rank's inputs by
// the tests' own reference; the inputs make any other order round
// differently. Averages must have the same bits in all four ways and on all
// ranks. Last, rank 1 joins while the others sum: its place in the order
// holds the identity. ctest runs it at 3 and 4 ranks with the shared-memory path, without
// it (HERD_SHM_ALLREDUCE_BYTES=0), without fusion (HERD_FUSION_THRESHOLD=0),
// with small fusion buffers, and with the ring alone
// (HERD_ALLREDUCE_ALGORITHM=ring).
#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"
#include "tests/unit/collectives/reduction_order_reference.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using herd_test::CaseCheck;
using herd_test::Recorder;

const std::vector<int64_t> kCounts = {1, 7, 1000, 4099, 20011, 70001, 300001};

// Rank `rank`'s value at index i of tensor t.
float input_value(int rank, std::size_t t, int64_t i) {
  return herd::collectives::testing::order_sensitive_value(rank, i + 11 * static_cast<int64_t>(t));
}

// The reduction order's sum at index i of tensor t; a rank in `joined`
// contributes the sum's identity, +0, instead of its input.
float reference_sum(int size, std::size_t t, int64_t i, int joined = -1) {
  return herd::collectives::testing::reduction_order_reference<float>(
      size, [t, i, joined](int rank) { return rank == joined ? 0.0f : input_value(rank, t, i); },
      herd::collectives::testing::add_floats);
}

enum class Way { kTogether, kGrouped, kOneByOne, kShuffled };
const char* way_name(Way way) {
  switch (way) {
    case Way::kTogether: return "together";
    case Way::kGrouped: return "grouped";
    case Way::kOneByOne: return "one by one";
    case Way::kShuffled: return "shuffled";
  }
  return "?";
}

// Reduces every tensor of kCounts with `op` in the given way; the outputs.
std::vector<std::vector<float>> reduce_all(Way way, ReduceOp op, int rank, int round) {
  const std::size_t n = kCounts.size();
  std::vector<std::vector<float>> inputs(n);
  std::vector<std::vector<float>> outputs(n);
  std::vector<std::string> names;
  std::vector<herd::TensorView> in_views;
  std::vector<herd::TensorView> out_views;
  for (std::size_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < kCounts[t]; ++i) inputs[t].push_back(input_value(rank, t, i));
    outputs[t].assign(inputs[t].size(), -1.0f);
    // A name per way and round: each is a fresh tensor to the runtime.
    names.push_back("order/" + std::to_string(round) + "/" + std::to_string(t));
    in_views.push_back({inputs[t].data(), DataType::kFloat32, {kCounts[t]}});
    out_views.push_back({outputs[t].data(), DataType::kFloat32, {kCounts[t]}});
  }
  switch (way) {
    case Way::kGrouped:
      herd::wait(herd::grouped_allreduce_async(names, in_views, out_views, op));
      break;
    case Way::kOneByOne:
      for (std::size_t t = 0; t < n; ++t) {
        herd::wait(herd::allreduce_async(names[t], in_views[t], out_views[t], op));
      }
      break;
    case Way::kTogether:
    case Way::kShuffled: {
      std::vector<std::size_t> order(n);
      for (std::size_t t = 0; t < n; ++t) order[t] = t;
      if (way == Way::kShuffled) {
        std::mt19937 rng(static_cast<unsigned>(rank * 31 + round));
        std::shuffle(order.begin(), order.end(), rng);
      }
      std::vector<herd::Handle> handles;
      for (std::size_t t : order) {
        handles.push_back(herd::allreduce_async(names[t], in_views[t], out_views[t], op));
      }
      for (const herd::Handle& handle : handles) herd::wait(handle);
      break;
    }
  }
  return outputs;
}

// Rank 1 joins at once while the others reduce every tensor, then join: the
// sums are the reduction order's with rank 1's value the identity, in its
// place.
void check_with_joined_rank(Recorder& rec, int rank, int size) {
  constexpr int kJoined = 1;
  if (rank == kJoined) {
    herd::join();
    return;
  }
  const auto sums = reduce_all(Way::kTogether, ReduceOp::kSum, rank, 1000);
  herd::join();
  for (std::size_t t = 0; t < kCounts.size(); ++t) {
    CaseCheck c(rec, "sum of " + std::to_string(kCounts[t]) + " floats with rank 1 joined");
    for (int64_t i = 0; i < kCounts[t]; ++i) {
      const float want = reference_sum(size, t, i, kJoined);
      const float got = sums[t][static_cast<std::size_t>(i)];
      if (std::memcmp(&want, &got, sizeof(float)) != 0) {
        c.mismatch(i, herd_test::double_string(want), herd_test::double_string(got));
      }
    }
  }
}

}  // namespace

int main() {
  if (!herd_test::init_herd("test_reduction_order")) return 1;
  const int rank = herd::rank();
  const int size = herd::size();
  Recorder rec("test_reduction_order", rank);
  try {
    int round = 0;
    std::vector<std::vector<float>> first_average;
    for (Way way : {Way::kTogether, Way::kGrouped, Way::kOneByOne, Way::kShuffled}) {
      const auto sums = reduce_all(way, ReduceOp::kSum, rank, round++);
      for (std::size_t t = 0; t < kCounts.size(); ++t) {
        CaseCheck c(
            rec, std::string(way_name(way)) + " sum of " + std::to_string(kCounts[t]) + " floats");
        for (int64_t i = 0; i < kCounts[t]; ++i) {
          const float want = reference_sum(size, t, i);
          const float got = sums[t][static_cast<std::size_t>(i)];
          if (std::memcmp(&want, &got, sizeof(float)) != 0) {
            c.mismatch(i, herd_test::double_string(want), herd_test::double_string(got));
          }
        }
      }
      const auto averages = reduce_all(way, ReduceOp::kAverage, rank, round++);
      if (first_average.empty()) {
        first_average = averages;
        // Every rank must hold rank 0's bits.
        for (std::size_t t = 0; t < kCounts.size(); ++t) {
          std::vector<float> root = averages[t];
          MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
          rec.check(std::memcmp(root.data(), averages[t].data(), root.size() * sizeof(float)) == 0,
                    "average of " + std::to_string(kCounts[t]) + " floats",
                    "differs from rank 0's");
        }
        continue;
      }
      for (std::size_t t = 0; t < kCounts.size(); ++t) {
        rec.check(
            std::memcmp(first_average[t].data(), averages[t].data(),
                        averages[t].size() * sizeof(float)) == 0,
            std::string(way_name(way)) + " average of " + std::to_string(kCounts[t]) + " floats",
            "differs from the average submitted together");
      }
    }
    check_with_joined_rank(rec, rank, size);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  return herd_test::shutdown_herd(rec) ? code : 1;
}
