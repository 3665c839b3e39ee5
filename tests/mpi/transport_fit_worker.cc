// One rank of the transport-fit test across emulated hosts
// (tests/scripts/transport_fit_hosts.py), run with HERD_LOG_LEVEL=debug so
// that every member of every set logs the settings its set runs with.
//
// Usage: transport_fit_worker
//
// Makes the sets {0, 1} and {0, size - 1} beside the global set and, on each
// set this rank belongs to, allreduces float32 buffers of 4 KiB, 1 MiB and
// 16 MiB (recursive doubling, the ring with one segment per chunk, the ring
// with several), checking every element against its closed form. Prints
// "ok <rank>" when every result was exact; on a wrong element it prints
// "wrong <rank> set <id> count <count> index <i> expected <e> got <g>" and
// exits 1.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "herd/herd.h"

namespace {

// Element i of `rank`'s input: small integers, so that every sum is exact
// whatever the order of additions.
float input_value(int rank, int64_t i) { return static_cast<float>((i + 3 * rank) % 61); }

// Reduces `count` elements over `set`; true when every element is the sum of
// the members' inputs.
bool exact_sum(const herd::ProcessSet& set, int64_t count) {
  const int rank = herd::rank();
  std::vector<float> input(static_cast<std::size_t>(count));
  std::vector<float> output(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) input[static_cast<std::size_t>(i)] = input_value(rank, i);
  herd::allreduce("transport-fit/" + std::to_string(set.id()) + "/" + std::to_string(count),
                  herd::TensorView{input.data(), herd::DataType::kFloat32, {count}},
                  herd::TensorView{output.data(), herd::DataType::kFloat32, {count}},
                  herd::ReduceOp::kSum, 1.0, 1.0, set);
  // The global set lists no ranks: it has them all.
  std::vector<int> members = set.ranks();
  if (set.is_global()) {
    for (int member = 0; member < herd::size(); ++member) members.push_back(member);
  }
  for (int64_t i = 0; i < count; ++i) {
    double expected = 0;
    for (int member : members) expected += input_value(member, i);
    const float got = output[static_cast<std::size_t>(i)];
    if (got != expected) {
      std::printf("wrong %d set %d count %lld index %lld expected %.0f got %.9g\n", rank, set.id(),
                  static_cast<long long>(count), static_cast<long long>(i), expected, got);
      return false;
    }
  }
  return true;
}

}  // namespace

int main() {
  herd::init();
  const int rank = herd::rank();
  const int size = herd::size();
  const std::vector<herd::ProcessSet> sets = {herd::global_process_set(),
                                              herd::add_process_set({0, 1}),
                                              herd::add_process_set({0, size - 1})};
  bool exact = true;
  for (const herd::ProcessSet& set : sets) {
    if (!set.includes(rank)) continue;
    for (int64_t count : {int64_t{1} << 10, int64_t{1} << 18, int64_t{1} << 22}) {
      exact = exact_sum(set, count) && exact;
    }
  }
  if (exact) std::printf("ok %d\n", rank);
  std::fflush(stdout);
  herd::shutdown();
  return exact ? 0 : 1;
}
