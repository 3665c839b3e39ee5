// BackgroundLoop with threads as ranks (loop_world.h): the negotiation cycle
// and fusion, the response cache and its invalidation, mismatches across
// ranks, herd::join, the stall warnings and the stall shutdown, shutdown by
// one rank, and a control channel that fails or a rank that never takes
// part. Every expected value is a closed form of the rank, the tensor and
// the element.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "loop_world.h"

namespace herd::detail {
namespace {

using std::chrono::milliseconds;
using testing::allreduce_entry;
using testing::global_rank;
using testing::kStopReason;
using testing::LoopWorld;
using testing::make_entry;
using testing::outcome;
using testing::WorldOptions;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// "" when every value matches, else the first mismatch and how many.
template <typename T, typename Expected>
std::string first_mismatch(const std::string& what, const std::vector<T>& actual,
                           Expected&& expected, double tolerance = 0.0) {
  int mismatches = 0;
  std::string first;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double want = expected(static_cast<int64_t>(i));
    if (std::fabs(static_cast<double>(actual[i]) - want) <= tolerance) continue;
    if (mismatches++ == 0) {
      first = fmt::format("{} element {}: expected {}, got {}", what, i, want,
                          static_cast<double>(actual[i]));
    }
  }
  return mismatches == 0 ? "" : fmt::format("{} ({} wrong)", first, mismatches);
}

// Per rank, what went wrong ("" when nothing did).
using RankFailures = std::vector<std::string>;

void require_no_failures(const RankFailures& failures) {
  for (std::size_t rank = 0; rank < failures.size(); ++rank) {
    INFO("rank " << rank);
    CHECK(failures[rank] == "");
  }
}

// Records the first failure of a rank.
void note(std::string* failure, const std::string& what) {
  if (failure->empty() && !what.empty()) *failure = what;
}

// The ranks of [0, p) in the order rank r submits n names: rotated by r,
// and reversed on odd ranks, so that no two ranks submit alike.
std::vector<int> submission_order(int rank, int n) {
  std::vector<int> order;
  for (int k = 0; k < n; ++k) order.push_back((k + rank) % n);
  if (rank % 2 == 1) std::reverse(order.begin(), order.end());
  return order;
}

// Sum over ranks 0..p-1 of (r + 1): the factor of a rank-dependent sum.
double rank_sum(int p) { return p * (p + 1) / 2.0; }

// Rank r's float32 tensor of `count` elements (r + 1) * scale + i.
std::vector<float> ramp(int rank, int count, double scale) {
  std::vector<float> values(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) values[i] = static_cast<float>((rank + 1) * scale + i);
  return values;
}

// The sum over `ranks` of ramp(r, count, scale)[i].
double ramp_sum(const std::vector<int>& ranks, double scale, int64_t i) {
  double sum = 0;
  for (int r : ranks) sum += (r + 1) * scale + static_cast<double>(i);
  return sum;
}

std::vector<int> all_ranks(int p) {
  std::vector<int> ranks;
  for (int r = 0; r < p; ++r) ranks.push_back(r);
  return ranks;
}

TensorView view_of(std::vector<float>& values) {
  return TensorView{values.data(), DataType::kFloat32, {static_cast<int64_t>(values.size())}};
}

// One round of sums on every rank: tensor k ("<prefix>/k", counts[k]
// elements) holds ramp(r, counts[k], round * 10 + k + 1) on rank r; submitted
// in submission_order, waited for, and checked against ramp_sum over every
// rank. Returns each rank's failures.
RankFailures sum_round(LoopWorld& world, const std::string& prefix, const std::vector<int>& counts,
                       int round) {
  RankFailures failures(static_cast<std::size_t>(world.size()));
  world.run_ranks([&](int rank) {
    const int n = static_cast<int>(counts.size());
    std::vector<std::vector<float>> data(static_cast<std::size_t>(n));
    std::vector<std::shared_ptr<HandleState>> handles(static_cast<std::size_t>(n));
    for (int k : submission_order(rank, n)) {
      data[k] = ramp(rank, counts[k], round * 10 + k + 1);
      handles[k] = world.submit(
          rank, allreduce_entry(rank, fmt::format("{}/{}", prefix, k), view_of(data[k])));
    }
    for (int k = 0; k < n; ++k) {
      const Status status = outcome(handles[k]);
      note(&failures[rank], status.message());
      if (!status.is_ok()) continue;
      note(&failures[rank],
           first_mismatch(fmt::format("{}/{}", prefix, k), data[k], [&](int64_t i) {
             return ramp_sum(all_ranks(world.size()), round * 10 + k + 1, i);
           }));
    }
  });
  return failures;
}

// Captures what the process writes to stderr (herd's log) while it lives.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = std::tmpfile();
    saved_ = dup(STDERR_FILENO);
    dup2(fileno(file_), STDERR_FILENO);
  }
  ~StderrCapture() { text(); }

  // Restores stderr (once) and returns everything written meanwhile.
  std::string text() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, STDERR_FILENO);
      close(saved_);
      saved_ = -1;
      std::rewind(file_);
      char buffer[4096];
      std::size_t n = 0;
      while ((n = std::fread(buffer, 1, sizeof(buffer), file_)) > 0) text_.append(buffer, n);
      std::fclose(file_);
    }
    return text_;
  }

 private:
  std::FILE* file_ = nullptr;
  int saved_ = -1;
  std::string text_;
};

int count_of(const std::string& text, const std::string& part) {
  int count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1))
    ++count;
  return count;
}

}  // namespace

TEST_CASE("background loop: every rank's allreduces complete with the sum over ranks",
          "[background_loop]") {
  const int p = GENERATE(1, 2, 3, 4);
  INFO(p << " ranks");
  WorldOptions options;
  options.size = p;
  LoopWorld world(options);
  world.start();
  // Sum, min and max of float32, and an average of float64; half of the
  // ranks wait on the background thread, half run the cycles themselves.
  constexpr int kTensors = 6;
  RankFailures failures(static_cast<std::size_t>(p));
  const auto value = [](int r, int k, int64_t i) -> double {
    if (k % 3 == 0) return (r + 1) * (k + 1) + static_cast<double>(i);
    return static_cast<double>((r * 5 + k * 3 + i) % 7) - 3;
  };
  const auto op_of = [](int k) {
    return k % 3 == 0 ? ReduceOp::kSum : k % 3 == 1 ? ReduceOp::kMin : ReduceOp::kMax;
  };
  world.run_ranks([&](int rank) {
    std::vector<std::vector<float>> data(kTensors);
    std::vector<std::shared_ptr<HandleState>> handles(kTensors);
    for (int k : submission_order(rank, kTensors)) {
      data[k].resize(static_cast<std::size_t>(1 + 3 * k));
      for (std::size_t i = 0; i < data[k].size(); ++i)
        data[k][i] = static_cast<float>(value(rank, k, static_cast<int64_t>(i)));
      handles[k] = world.submit(
          rank, allreduce_entry(rank, fmt::format("t/{}", k), view_of(data[k]), op_of(k)));
    }
    std::vector<double> average(5);
    for (std::size_t i = 0; i < average.size(); ++i) average[i] = (rank + 1) * 3.0 + i;
    auto average_handle = world.submit(
        rank, allreduce_entry(rank, "t/average", {average.data(), DataType::kFloat64, {5}},
                              ReduceOp::kAverage));
    const bool drive = rank % 2 == 1;
    for (int k = 0; k < kTensors; ++k) {
      const Status status = drive ? handles[k]->wait() : outcome(handles[k]);
      note(&failures[rank], status.message());
      note(&failures[rank], first_mismatch(fmt::format("t/{}", k), data[k], [&](int64_t i) {
        double folded = value(0, k, i);
        for (int r = 1; r < p; ++r) {
          const double x = value(r, k, i);
          folded = op_of(k) == ReduceOp::kSum   ? folded + x
                   : op_of(k) == ReduceOp::kMin ? std::min(folded, x)
                                                : std::max(folded, x);
        }
        return folded;
      }));
    }
    note(&failures[rank], (drive ? average_handle->wait() : outcome(average_handle)).message());
    note(&failures[rank],
         first_mismatch(
             "t/average", average, [&](int64_t i) { return 3.0 * rank_sum(p) / p + i; }, 1e-12));
  });
  require_no_failures(failures);
}

TEST_CASE("background loop: tensors agreed in one cycle are fused into one allreduce",
          "[background_loop]") {
  const int p = GENERATE(2, 3, 4);
  INFO(p << " ranks");
  // Three float32 sums queued before the loops start, so that every rank's
  // first cycle has them all; then one tensor alone. Fused, the three cost
  // the messages of one small allreduce; with fusion off, three times that.
  const std::vector<int> counts = {3, 5, 2};
  std::vector<int64_t> fused_sends(p), unfused_sends(p), lone_sends(p), lone_sends_unfused(p);
  for (const bool fusion : {true, false}) {
    WorldOptions options;
    options.size = p;
    if (!fusion) options.config.fusion_threshold_bytes = 0;
    // One algorithm throughout: a measured choice would explore others, whose
    // message counts differ.
    options.config.allreduce_algorithm = AllreduceAlgorithmSetting::kRecursiveDoubling;
    LoopWorld world(options);
    std::vector<std::vector<std::vector<float>>> data(p);
    std::vector<std::vector<std::shared_ptr<HandleState>>> handles(p);
    for (int rank = 0; rank < p; ++rank) {
      data[rank].resize(counts.size());
      handles[rank].resize(counts.size());
      for (int k : submission_order(rank, static_cast<int>(counts.size()))) {
        data[rank][k] = ramp(rank, counts[k], k + 1);
        handles[rank][k] = world.submit(
            rank, allreduce_entry(rank, fmt::format("f/{}", k), view_of(data[rank][k])));
      }
    }
    world.start();
    for (int rank = 0; rank < p; ++rank) {
      for (std::size_t k = 0; k < counts.size(); ++k) {
        INFO("rank " << rank << " f/" << k << " fusion " << fusion);
        REQUIRE(outcome(handles[rank][k]).message() == "");
        CHECK(first_mismatch("f", data[rank][k], [&](int64_t i) {
                return ramp_sum(all_ranks(p), static_cast<double>(k + 1), i);
              }) == "");
      }
      (fusion ? fused_sends : unfused_sends)[rank] = world.sends(rank);
    }
    const RankFailures failures = sum_round(world, "lone", {4}, 0);
    require_no_failures(failures);
    for (int rank = 0; rank < p; ++rank) {
      (fusion ? lone_sends : lone_sends_unfused)[rank] =
          world.sends(rank) - (fusion ? fused_sends : unfused_sends)[rank];
    }
  }
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(lone_sends[rank] > 0);
    CHECK(lone_sends_unfused[rank] == lone_sends[rank]);
    CHECK(fused_sends[rank] == lone_sends[rank]);
    CHECK(unfused_sends[rank] == 3 * lone_sends[rank]);
  }
}

TEST_CASE("background loop: tensors back to back in memory in another order on each rank sum right",
          "[background_loop]") {
  const int p = GENERATE(2, 3, 4);
  INFO(p << " ranks");
  // Every rank's three tensors lie back to back in one arena and are reduced
  // in place, but each rank lays them out in its own order: only a rank
  // whose layout is the fused group's may reduce the arena where it lies,
  // the others pack a fusion buffer in the group's order.
  const std::vector<int> counts = {3, 5, 2};
  WorldOptions options;
  options.size = p;
  LoopWorld world(options);
  std::vector<std::vector<float>> arenas(p, std::vector<float>(10));
  std::vector<std::vector<float*>> starts(p, std::vector<float*>(counts.size()));
  std::vector<std::vector<std::shared_ptr<HandleState>>> handles(p);
  for (int rank = 0; rank < p; ++rank) {
    float* next = arenas[rank].data();
    for (int k : submission_order(rank, static_cast<int>(counts.size()))) {
      starts[rank][k] = next;
      next += counts[k];
    }
    handles[rank].resize(counts.size());
    for (int k : submission_order(rank, static_cast<int>(counts.size()))) {
      const std::vector<float> values = ramp(rank, counts[k], k + 1);
      std::copy(values.begin(), values.end(), starts[rank][k]);
      const TensorView view{starts[rank][k], DataType::kFloat32, {counts[k]}};
      handles[rank][k] = world.submit(rank, allreduce_entry(rank, fmt::format("b/{}", k), view));
    }
  }
  world.start();
  for (int rank = 0; rank < p; ++rank) {
    for (std::size_t k = 0; k < counts.size(); ++k) {
      INFO("rank " << rank << " b/" << k);
      REQUIRE(outcome(handles[rank][k]).message() == "");
      const std::vector<float> result(starts[rank][k], starts[rank][k] + counts[k]);
      CHECK(first_mismatch("b", result, [&](int64_t i) {
              return ramp_sum(all_ranks(p), static_cast<double>(k + 1), i);
            }) == "");
    }
  }
}

TEST_CASE("background loop: names submitted again settle through the response cache",
          "[background_loop]") {
  const int p = GENERATE(2, 3, 4);
  INFO(p << " ranks");
  WorldOptions options;
  options.size = p;
  LoopWorld world(options);
  world.start();
  const auto negotiations = [&] {
    std::vector<int64_t> counts;
    for (int rank = 0; rank < p; ++rank) counts.push_back(world.negotiations(rank));
    return counts;
  };
  const std::vector<int64_t> none(static_cast<std::size_t>(p), 0);
  const auto since = [&](const std::vector<int64_t>& before) {
    std::vector<int64_t> delta = negotiations();
    for (int rank = 0; rank < p; ++rank) delta[rank] -= before[rank];
    return delta;
  };

  // Round 0 negotiates the names; round 1 (same names, same shapes, other
  // values) agrees on them through the cache alone, with no negotiation.
  require_no_failures(sum_round(world, "c", {4, 6, 2}, 0));
  const std::vector<int64_t> after_first = negotiations();
  for (int rank = 0; rank < p; ++rank) CHECK(after_first[rank] > 0);
  require_no_failures(sum_round(world, "c", {4, 6, 2}, 1));
  CHECK(since(after_first) == none);

  // Round 2: c/0 with 5 elements instead of 4 on every rank: the cached
  // signature no longer matches, the name is negotiated again.
  std::vector<int64_t> before = negotiations();
  require_no_failures(sum_round(world, "c", {5, 6, 2}, 2));
  for (int64_t delta : since(before)) CHECK(delta > 0);
  // Round 3: the new signature is the cached one now.
  before = negotiations();
  require_no_failures(sum_round(world, "c", {5, 6, 2}, 3));
  CHECK(since(before) == none);
}

TEST_CASE("background loop: without a response cache every round negotiates", "[background_loop]") {
  WorldOptions options;
  options.size = 3;
  options.config.cache_capacity = 0;
  LoopWorld world(options);
  world.start();
  require_no_failures(sum_round(world, "n", {4, 6}, 0));
  std::vector<int64_t> before;
  for (int rank = 0; rank < 3; ++rank) before.push_back(world.negotiations(rank));
  require_no_failures(sum_round(world, "n", {4, 6}, 1));
  for (int rank = 0; rank < 3; ++rank) CHECK(world.negotiations(rank) > before[rank]);
}

TEST_CASE("background loop: ranks that disagree fail every rank's handle, naming each rank",
          "[background_loop]") {
  const int p = GENERATE(2, 3, 4);
  INFO(p << " ranks");
  WorldOptions options;
  options.size = p;
  LoopWorld world(options);
  world.start();
  require_no_failures(sum_round(world, "m", {4}, 0));

  // m/0 is cached with 4 elements; the last rank now submits 5, so every
  // rank drops the slot and the renegotiation finds the shapes differ. The
  // float64 tensor m/dtype on rank 0 (float32 elsewhere) is never cached.
  std::string shape_clause = "shape mismatch: ";
  std::string dtype_clause = "dtype mismatch: ";
  for (int r = 0; r < p; ++r) {
    shape_clause +=
        fmt::format("{}rank {} [{}]", r > 0 ? ", " : "", global_rank(r), r == p - 1 ? 5 : 4);
    dtype_clause += fmt::format("{}rank {} {}", r > 0 ? ", " : "", global_rank(r),
                                r == 0 ? "float64" : "float32");
  }
  std::vector<std::string> shape_errors(p), dtype_errors(p);
  world.run_ranks([&](int rank) {
    std::vector<float> values(rank == p - 1 ? 5 : 4, 1.0f);
    std::vector<double> wide(3, 1.0);
    std::vector<float> narrow(3, 1.0f);
    const TensorView typed = rank == 0 ? TensorView{wide.data(), DataType::kFloat64, {3}}
                                       : TensorView{narrow.data(), DataType::kFloat32, {3}};
    auto shape_handle = world.submit(rank, allreduce_entry(rank, "m/0", view_of(values)));
    auto dtype_handle = world.submit(rank, allreduce_entry(rank, "m/dtype", typed));
    shape_errors[rank] = outcome(shape_handle).message();
    dtype_errors[rank] = outcome(dtype_handle).message();
  });
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(shape_errors[rank] == "allreduce 'm/0': " + shape_clause);
    CHECK(dtype_errors[rank] == "allreduce 'm/dtype': " + dtype_clause);
  }
  // A disagreement fails the operation, not the loop.
  require_no_failures(sum_round(world, "m", {4}, 1));
}

TEST_CASE("background loop: joined ranks add the identity until every rank has joined",
          "[background_loop]") {
  const int p = GENERATE(2, 3, 4);
  INFO(p << " ranks");
  WorldOptions options;
  options.size = p;
  LoopWorld world(options);
  world.start();
  // j/x and the broadcast j/b are cached before anyone joins.
  require_no_failures(sum_round(world, "j", {4}, 0));
  RankFailures failures(static_cast<std::size_t>(p));
  world.run_ranks([&](int rank) {
    std::vector<float> bytes(2, static_cast<float>(rank));
    auto entry = make_entry(CollectiveType::kBroadcast, rank, "j/b", view_of(bytes));
    entry.request.root = global_rank(0);
    note(&failures[rank], outcome(world.submit(rank, std::move(entry))).message());
    note(&failures[rank], first_mismatch("j/b", bytes, [](int64_t) { return 0.0; }));
  });
  require_no_failures(failures);

  // Rank 0 joins at once; rank r >= 1 runs r + 1 steps, then joins, so at
  // step s the ranks max(1, s)..p-1 submit. Each step reduces the cached j/0
  // and the new name j/step<s>, as a sum, and an average, which divides the
  // sum of the ranks that submit by all p ranks. The last rank runs the
  // most steps and joins last.
  std::vector<int> last_rank(p, -1);
  std::vector<std::string> blocked(p), refused_barrier(p), second_join(p);
  world.run_ranks([&](int rank) {
    std::shared_ptr<HandleState> join;
    if (rank == 0) {
      join = world.loop(0).join(&last_rank[0]);
      second_join[0] = outcome(world.loop(0).join(nullptr)).message();
    }
    for (int s = 0; rank > 0 && s <= rank; ++s) {
      std::vector<int> active;
      for (int r = std::max(1, s); r < p; ++r) active.push_back(r);
      std::vector<float> cached = ramp(rank, 4, s + 1);
      std::vector<float> fresh = ramp(rank, 3, s + 2);
      std::vector<float> average = ramp(rank, 2, s + 3);
      auto cached_handle = world.submit(rank, allreduce_entry(rank, "j/0", view_of(cached)));
      auto fresh_handle =
          world.submit(rank, allreduce_entry(rank, fmt::format("j/step{}", s), view_of(fresh)));
      auto average_handle = world.submit(
          rank,
          allreduce_entry(rank, fmt::format("j/avg{}", s), view_of(average), ReduceOp::kAverage));
      if (s == 0) {
        // Only allreduces run while a rank is joined: the cached broadcast
        // and a fresh barrier fail.
        std::vector<float> bytes(2, 0.0f);
        auto entry = make_entry(CollectiveType::kBroadcast, rank, "j/b", view_of(bytes));
        entry.request.root = global_rank(0);
        blocked[rank] = outcome(world.submit(rank, std::move(entry))).message();
        refused_barrier[rank] =
            outcome(world.submit(rank, make_entry(CollectiveType::kBarrier, rank, "j/barrier",
                                                  TensorView{})))
                .message();
      }
      const std::string step = fmt::format("step {}: ", s);
      note(&failures[rank], outcome(cached_handle).with_context(step).message());
      note(&failures[rank], outcome(fresh_handle).with_context(step).message());
      note(&failures[rank], outcome(average_handle).with_context(step).message());
      note(&failures[rank], first_mismatch(step + "j/0", cached,
                                           [&](int64_t i) { return ramp_sum(active, s + 1, i); }));
      note(&failures[rank], first_mismatch(step + "fresh", fresh,
                                           [&](int64_t i) { return ramp_sum(active, s + 2, i); }));
      note(&failures[rank], first_mismatch(
                                step + "average", average,
                                [&](int64_t i) { return ramp_sum(active, s + 3, i) / p; }, 1e-5));
    }
    if (rank > 0) {
      if (rank == p - 1) std::this_thread::sleep_for(milliseconds(50));
      join = world.loop(rank).join(&last_rank[rank]);
    }
    note(&failures[rank], outcome(join).with_context("join: ").message());
  });
  require_no_failures(failures);
  const std::string joined_clause =
      "ranks [" + std::to_string(global_rank(0)) +
      "] have joined (herd::join); only allreduce and grouped allreduce run while ranks are joined";
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(last_rank[rank] == global_rank(p - 1));
    if (rank == 0) {
      CHECK(second_join[0] == "join: this rank is already waiting in herd::join");
    } else {
      CHECK(blocked[rank] == "broadcast 'j/b': " + joined_clause);
      CHECK(refused_barrier[rank] == "barrier 'j/barrier': " + joined_clause);
    }
  }
  // After the join every rank reduces again, the cached name included.
  require_no_failures(sum_round(world, "j", {4}, 5));
}

TEST_CASE("background loop: every rank warns once per stalled tensor, naming the missing rank",
          "[background_loop]") {
  WorldOptions options;
  options.size = 3;
  options.config.stall_check_seconds = 0.2;
  LoopWorld world(options);
  world.start();
  require_no_failures(sum_round(world, "s", {4}, 0));  // caches s/0

  // Ranks 0 and 1 submit the cached s/0, and 1.5 s later the new s/new;
  // rank 2 submits both 3.5 s after the start. One warning for each name,
  // the same text on every rank, names rank 2 (global 12) and the ranks
  // waiting.
  RankFailures failures(3);
  std::string log;
  {
    StderrCapture capture;
    world.run_ranks([&](int rank) {
      std::vector<float> cached = ramp(rank, 4, 7);
      std::vector<float> fresh = ramp(rank, 2, 8);
      std::shared_ptr<HandleState> cached_handle;
      if (rank == 2) {
        std::this_thread::sleep_for(milliseconds(3500));
      } else {
        cached_handle = world.submit(rank, allreduce_entry(rank, "s/0", view_of(cached)));
        std::this_thread::sleep_for(milliseconds(1500));
      }
      auto fresh_handle = world.submit(rank, allreduce_entry(rank, "s/new", view_of(fresh)));
      if (rank == 2)
        cached_handle = world.submit(rank, allreduce_entry(rank, "s/0", view_of(cached)));
      note(&failures[rank], outcome(cached_handle).message());
      note(&failures[rank], outcome(fresh_handle).message());
      note(&failures[rank], first_mismatch("s/0", cached, [](int64_t i) {
        return ramp_sum({0, 1, 2}, 7, i);
      }));
      note(&failures[rank], first_mismatch("s/new", fresh, [](int64_t i) {
        return ramp_sum({0, 1, 2}, 8, i);
      }));
    });
    log = capture.text();
  }
  require_no_failures(failures);
  INFO(log);
  for (const std::string name : {"s/0", "s/new"}) {
    INFO(name);
    const std::regex warning(fmt::format(
        R"(WARN: stall: rank {} has not submitted allreduce '{}' \(ranks \[{}, {}\] have waited )"
        R"((\d+\.\d) s\); a rank that never submits a tensor stalls every rank waiting for it)",
        global_rank(2), name, global_rank(0), global_rank(1)));
    std::vector<std::string> waits;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), warning);
         it != std::sregex_iterator(); ++it) {
      waits.push_back((*it)[1].str());
    }
    REQUIRE(waits.size() == 3);  // one per rank
    CHECK(waits[1] == waits[0]);
    CHECK(waits[2] == waits[0]);
    CHECK(std::stod(waits[0]) >= 0.2);
    CHECK(std::stod(waits[0]) < 2.0);
  }
  CHECK(count_of(log, "WARN: stall: ") == 6);
}

// The stall shutdown's text with each "have waited <seconds> s" made
// "have waited _ s"; the seconds go to *waits.
std::string without_waits(const std::string& text, std::vector<double>* waits) {
  static const std::regex wait(R"(have waited (\d+\.\d) s)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), wait); it != std::sregex_iterator();
       ++it) {
    waits->push_back(std::stod((*it)[1].str()));
  }
  return std::regex_replace(text, wait, "have waited _ s");
}

TEST_CASE("background loop: a rank that never submits stops the set after the stall shutdown time",
          "[background_loop]") {
  const int p = GENERATE(2, 3);
  INFO(p << " ranks");
  WorldOptions options;
  options.size = p;
  options.config.stall_shutdown_seconds = 1.0;
  LoopWorld world(options);
  world.start();
  require_no_failures(sum_round(world, "s", {4}, 0));  // caches s/0

  // Every rank but rank 1 submits the cached s/0 and the new s/new; rank 1
  // submits nothing. Each waiting rank's handles fail with the one text,
  // naming rank 1 (global 11), both names and the ranks that waited.
  std::vector<int> waiting;
  for (int rank = 0; rank < p; ++rank) {
    if (rank != 1) waiting.push_back(global_rank(rank));
  }
  const std::string expected_reason = fmt::format(
      "herd stopped: tensors waited longer than HERD_STALL_SHUTDOWN_TIME for ranks that did not "
      "submit them: rank {0} has not submitted allreduce 's/0' (ranks [{1}] have waited _ s), "
      "allreduce 's/new' (ranks [{1}] have waited _ s)",
      global_rank(1), fmt::join(waiting, ", "));
  std::vector<std::vector<float>> cached(p), fresh(p);
  std::vector<std::shared_ptr<HandleState>> handles;
  const auto start = std::chrono::steady_clock::now();
  for (int rank = 0; rank < p; ++rank) {
    if (rank == 1) continue;
    cached[rank] = ramp(rank, 4, 7);
    fresh[rank] = ramp(rank, 2, 8);
    handles.push_back(world.submit(rank, allreduce_entry(rank, "s/0", view_of(cached[rank]))));
    handles.push_back(world.submit(rank, allreduce_entry(rank, "s/new", view_of(fresh[rank]))));
  }
  std::vector<std::string> reasons;
  for (const auto& handle : handles) {
    const std::string message = outcome(handle).message();
    const std::string prefix = handle->description() + ": ";
    INFO(message);
    REQUIRE(message.rfind(prefix, 0) == 0);
    reasons.push_back(message.substr(prefix.size()));
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // Not before the shutdown time; within it and generous slack after.
  CHECK(elapsed >= 1.0);
  CHECK(elapsed < 11.0);
  for (const std::string& reason : reasons) {
    INFO(reason);
    CHECK(reason == reasons.front());  // the same text on every rank
    std::vector<double> waits;
    CHECK(without_waits(reason, &waits) == expected_reason);
    REQUIRE(waits.size() == 2);
    for (double wait : waits) {
      CHECK(wait >= 0.9);  // rounded to 0.1 s; the later name may be just short of 1 s
      CHECK(wait < 11.0);
    }
  }
  // Every loop has stopped, and the queues are closed with the same reason:
  // rank 1's late submission fails with it too.
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(world.loop_ended(rank));
    std::vector<float> late(4, 1.0f);
    CHECK(outcome(world.submit(rank, allreduce_entry(rank, "s/new", view_of(late)))).message() ==
          "allreduce 's/new': " + reasons.front());
  }
}

TEST_CASE("background loop: a rank that submits late but within the stall shutdown time succeeds",
          "[background_loop]") {
  // 0: no shutdown at all; 5 s: the late rank comes 1 s after the others;
  // 1e300 s: longer than the clock counts, so never.
  const double shutdown_seconds = GENERATE(0.0, 5.0, 1e300);
  INFO("HERD_STALL_SHUTDOWN_TIME " << shutdown_seconds);
  WorldOptions options;
  options.size = 3;
  options.config.stall_shutdown_seconds = shutdown_seconds;
  LoopWorld world(options);
  world.start();
  require_no_failures(sum_round(world, "s", {4}, 0));  // caches s/0
  RankFailures failures(3);
  world.run_ranks([&](int rank) {
    if (rank == 1) std::this_thread::sleep_for(milliseconds(1000));
    std::vector<float> cached = ramp(rank, 4, 7);
    std::vector<float> fresh = ramp(rank, 2, 8);
    auto cached_handle = world.submit(rank, allreduce_entry(rank, "s/0", view_of(cached)));
    auto fresh_handle = world.submit(rank, allreduce_entry(rank, "s/new", view_of(fresh)));
    note(&failures[rank], outcome(cached_handle).message());
    note(&failures[rank], outcome(fresh_handle).message());
    note(&failures[rank], first_mismatch("s/0", cached, [](int64_t i) {
      return ramp_sum({0, 1, 2}, 7, i);
    }));
    note(&failures[rank], first_mismatch("s/new", fresh, [](int64_t i) {
      return ramp_sum({0, 1, 2}, 8, i);
    }));
  });
  require_no_failures(failures);
  // The set goes on.
  require_no_failures(sum_round(world, "s", {4}, 1));
}

TEST_CASE("background loop: one rank's shutdown fails every rank's pending operations",
          "[background_loop]") {
  const int p = GENERATE(2, 3);
  // With a stall check, the orphans have been warned about by the time of the
  // shutdown, whose reason still wins over the stall shutdown's later one.
  const bool stall_check = GENERATE(false, true);
  INFO(p << " ranks, stall check " << stall_check);
  WorldOptions options;
  options.size = p;
  if (stall_check) {
    options.config.stall_check_seconds = 0.1;
    options.config.stall_shutdown_seconds = 60.0;
  }
  LoopWorld world(options);
  world.start();
  // Each rank has an allreduce no other rank submits, pending while a name
  // every rank submits completes. With three ranks the last one then joins,
  // which leaves every orphan waiting for a rank that has not joined.
  std::vector<std::shared_ptr<HandleState>> orphans(p);
  std::vector<std::vector<float>> orphan_data(p, std::vector<float>(3, 1.0f));
  for (int rank = 0; rank < p; ++rank) {
    orphans[rank] = world.submit(
        rank, allreduce_entry(rank, fmt::format("orphan/{}", rank), view_of(orphan_data[rank])));
  }
  require_no_failures(sum_round(world, "matched", {5}, 0));
  for (int rank = 0; rank < p; ++rank) CHECK_FALSE(orphans[rank]->done());
  std::shared_ptr<HandleState> join;
  if (p == 3) join = world.loop(p - 1).join(nullptr);
  if (stall_check) std::this_thread::sleep_for(milliseconds(300));

  world.loop(0).request_shutdown();
  for (int rank = 0; rank < p; ++rank) {
    INFO("rank " << rank);
    CHECK(outcome(orphans[rank]).message() ==
          fmt::format("allreduce 'orphan/{}': {}", rank, kStopReason));
    CHECK(world.loop_ended(rank));
    // The queue is closed: a later submission fails with the same reason.
    std::vector<float> late(2, 1.0f);
    CHECK(outcome(world.submit(rank, allreduce_entry(rank, "late", view_of(late)))).message() ==
          "allreduce 'late': " + kStopReason);
  }
  if (join) CHECK(outcome(join).message() == "join: " + kStopReason);
}

TEST_CASE("background loop: a control channel that fails ends every rank's loop with its error",
          "[background_loop]") {
  WorldOptions options;
  options.size = 3;
  LoopWorld world(options);
  world.start();
  require_no_failures(sum_round(world, "before", {3}, 0));
  std::vector<std::shared_ptr<HandleState>> orphans(3);
  std::vector<std::vector<float>> orphan_data(3, std::vector<float>(3, 1.0f));
  for (int rank = 0; rank < 3; ++rank) {
    orphans[rank] = world.submit(
        rank, allreduce_entry(rank, fmt::format("orphan/{}", rank), view_of(orphan_data[rank])));
  }
  world.control_world().abort("rank 1 lost its connection");
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    const std::string message = outcome(orphans[rank]).message();
    INFO(message);
    CHECK(message.rfind(fmt::format("allreduce 'orphan/{}': herd stopped after an error: rank {}: ",
                                    rank, rank),
                        0) == 0);
    CHECK(contains(message, " failed: rank 1 lost its connection"));
    CHECK(world.loop_ended(rank));
  }
}

TEST_CASE("background loop: a rank that never takes part fails the others after the timeout",
          "[background_loop]") {
  WorldOptions options;
  options.size = 3;
  options.absent = 2;
  options.timeout = milliseconds(1500);
  LoopWorld world(options);
  world.start();
  std::vector<std::string> messages(2);
  world.run_ranks([&](int rank) {
    if (rank == 2) return;
    std::vector<float> values(4, 1.0f);
    messages[rank] =
        outcome(world.submit(rank, allreduce_entry(rank, "t", view_of(values)))).message();
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << messages[rank]);
    CHECK(messages[rank].rfind("allreduce 't': herd stopped after an error: ", 0) == 0);
    CHECK(contains(messages[rank],
                   "waited 1500 ms in and_allreduce (control round 0) for ranks [2]"));
    CHECK(world.loop_ended(rank));
  }
}

}  // namespace herd::detail
