// Autotuning: the coordinate search on synthetic scores whose best point is
// known beforehand, the decision's encoding, and the tuner driven through a
// simulated job whose step time depends on the settings (its scores and its
// log checked against that step time).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "src/autotune.h"

namespace herd::detail {
namespace {

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * 1024;

// A score peaked at `target` (indices per knob): each step away on any
// knob costs a factor e^-0.3, so neighbours differ by about 26 %.
double peaked(const std::vector<std::size_t>& at, const std::vector<std::size_t>& target) {
  double distance = 0.0;
  for (std::size_t k = 0; k < at.size(); ++k) {
    const double d = static_cast<double>(at[k]) - static_cast<double>(target[k]);
    distance += d * d;
  }
  return 100.0 * std::exp(-0.3 * distance);
}

std::vector<std::size_t> indices_of(const std::vector<std::vector<int64_t>>& grids,
                                    const std::vector<int64_t>& values) {
  std::vector<std::size_t> indices;
  for (std::size_t k = 0; k < grids.size(); ++k) {
    std::size_t i = 0;
    while (grids[k][i] != values[k]) ++i;
    indices.push_back(i);
  }
  return indices;
}

// Grids whose value at index i is 10 * (k + 1) + i, so a value names its
// knob and index.
std::vector<std::vector<int64_t>> numbered_grids(const std::vector<std::size_t>& sizes) {
  std::vector<std::vector<int64_t>> grids;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    std::vector<int64_t> grid;
    for (std::size_t i = 0; i < sizes[k]; ++i)
      grid.push_back(static_cast<int64_t>(10 * (k + 1) + i));
    grids.push_back(grid);
  }
  return grids;
}

// Runs the search to the end on `score`, with relative noise of up to
// `noise` on each measurement; returns the indices it fixed.
template <typename Score>
std::vector<std::size_t> run_search(CoordinateSearch& search,
                                    const std::vector<std::vector<int64_t>>& grids, Score score,
                                    double noise, int* trials) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> jitter(-noise, noise);
  int guard = 0;
  while (!search.converged()) {
    REQUIRE(++guard < 1000);
    search.report(score(indices_of(grids, search.trial())) * (1.0 + jitter(rng)));
  }
  *trials = search.trials();
  return indices_of(grids, search.best());
}

}  // namespace

TEST_CASE("autotune: coordinate search converges to the clearly best setting", "[autotune]") {
  const std::vector<std::size_t> sizes = {7, 8, 5, 7};
  const std::vector<std::vector<int64_t>> grids = numbered_grids(sizes);
  const std::vector<std::vector<std::size_t>> targets = {
      {0, 0, 0, 0}, {6, 7, 4, 6}, {3, 1, 4, 0}, {2, 5, 2, 2}};
  const std::vector<std::vector<std::size_t>> starts = {{2, 2, 2, 3}, {0, 7, 0, 6}, {6, 0, 4, 0}};
  for (const auto& target : targets) {
    for (const auto& start : starts) {
      for (double noise : {0.0, 0.005}) {
        INFO("target " << target[0] << target[1] << target[2] << target[3] << ", start " << start[0]
                       << start[1] << start[2] << start[3] << ", noise " << noise);
        CoordinateSearch search(grids, start, 0.01);
        int trials = 0;
        const auto best = run_search(
            search, grids, [&](const std::vector<std::size_t>& at) { return peaked(at, target); },
            noise, &trials);
        CHECK(best == target);
        // Fewer trials than the grid has points along all knobs together,
        // twice: far fewer than the 1960 points of the whole grid.
        CHECK(trials <= 2 * (7 + 8 + 5 + 7));
        CHECK(search.trial() == search.best());
      }
    }
  }
}

TEST_CASE("autotune: each pass after a move measures the best point again", "[autotune]") {
  const std::vector<std::vector<int64_t>> grids = numbered_grids({3, 3});
  CoordinateSearch search(grids, {0, 0});
  // The best point's first score was flattered: measured again it scores
  // 50, below its neighbour (1, 1) at 60, which then wins.
  int trial = 0;
  std::vector<std::vector<int64_t>> seen;
  const auto score = [&](const std::vector<int64_t>& at) {
    ++trial;
    if (at == std::vector<int64_t>{11, 20}) return trial == 2 ? 100.0 : 50.0;
    if (at == std::vector<int64_t>{11, 21}) return 60.0;
    return 10.0;
  };
  while (!search.converged()) {
    REQUIRE(seen.size() < 100);
    seen.push_back(search.trial());
    search.report(score(search.trial()));
  }
  // Start (10, 20); knob 0 up to (11, 20) at a flattering 100, (12, 20)
  // lower; knob 1 up (11, 21) at 60, below 100; down: none. The next pass
  // measures (11, 20) again at 50, and (12, 20) no better, then (11, 21)
  // wins, (11, 22) does not; a last pass from (11, 21) moves nothing.
  REQUIRE(seen.size() >= 7);
  CHECK(seen[0] == std::vector<int64_t>{10, 20});
  CHECK(seen[1] == std::vector<int64_t>{11, 20});
  CHECK(seen[2] == std::vector<int64_t>{12, 20});
  CHECK(seen[3] == std::vector<int64_t>{11, 21});
  CHECK(seen[4] == std::vector<int64_t>{11, 20});
  CHECK(search.best() == std::vector<int64_t>{11, 21});
  CHECK(search.best_score() == Approx(60.0));
}

TEST_CASE("autotune: the search ends after its passes when every move gains", "[autotune]") {
  // A score that rises with every measurement, as a machine whose load
  // lifts would give: every step is taken, so only the pass limit ends it.
  const std::vector<std::vector<int64_t>> grids = numbered_grids({4, 4});
  const auto rising = [](CoordinateSearch& search, int limit) {
    double score = 1.0;
    int trials = 0;
    while (!search.converged() && trials < limit) {
      search.report(score *= 1.1);
      ++trials;
    }
    return trials;
  };
  CoordinateSearch unlimited(grids, {0, 0}, 0.01);
  CHECK(rising(unlimited, 500) == 500);
  CHECK_FALSE(unlimited.converged());
  CoordinateSearch limited(grids, {0, 0}, 0.01, 2);
  // Pass 1: the start, knob 0 up 3 steps to its grid's end, knob 1
  // likewise: 1 + 3 + 3 = 7. Pass 2: the best again, then each knob down
  // 3 steps: 1 + 3 + 3 = 7.
  CHECK(rising(limited, 500) == 14);
  CHECK(limited.converged());
  CHECK(limited.best() == std::vector<int64_t>{10, 20});
}

TEST_CASE("autotune: a start at the best point measures only its neighbours", "[autotune]") {
  const std::vector<std::vector<int64_t>> grids = numbered_grids({5, 5, 5, 5});
  const std::vector<std::size_t> start = {2, 2, 2, 2};
  CoordinateSearch search(grids, start);
  int trials = 0;
  const auto best = run_search(
      search, grids, [&](const std::vector<std::size_t>& at) { return peaked(at, start); }, 0.0,
      &trials);
  CHECK(best == start);
  // The start, then one step up and one down on each knob.
  CHECK(trials == 1 + 2 * 4);
  CHECK(search.best_score() == Approx(100.0));
}

TEST_CASE("autotune: a knob of one value and a start at a grid's end", "[autotune]") {
  const std::vector<std::vector<int64_t>> grids = {{1, 2, 4, 8}, {5}};
  CoordinateSearch search(grids, {3, 0});
  // Only the first knob matters; its best is the lowest value.
  std::vector<std::vector<int64_t>> seen;
  while (!search.converged()) {
    seen.push_back(search.trial());
    search.report(100.0 / static_cast<double>(search.trial()[0]));
  }
  CHECK(search.best() == std::vector<int64_t>{1, 5});
  // 8, then 4, 2, 1 downwards (the grid's top has nothing above), then a
  // second pass that measures 1 again before it tries 2 once more.
  CHECK(seen == std::vector<std::vector<int64_t>>{{8, 5}, {4, 5}, {2, 5}, {1, 5}, {1, 5}, {2, 5}});
}

TEST_CASE("autotune: the decision's encoding round-trips and refuses damage", "[autotune]") {
  AutotuneDecision decision;
  decision.settings = {8 * kMiB, 0, 128 * kKiB, 2 * kMiB};
  decision.previous_score = 1.5e9;
  decision.final = true;
  decision.best_score = 2.25e9;
  const std::vector<uint8_t> bytes = encode(decision);
  AutotuneDecision read;
  REQUIRE(decode(bytes, &read).is_ok());
  CHECK(read.settings == decision.settings);
  CHECK(read.previous_score == decision.previous_score);
  CHECK(read.final);
  CHECK(read.best_score == decision.best_score);

  std::vector<uint8_t> short_bytes(bytes.begin(), bytes.end() - 1);
  const Status truncated = decode(short_bytes, &read);
  REQUIRE_FALSE(truncated.is_ok());
  CHECK_THAT(truncated.message(), Catch::Contains("autotune decision"));
  std::vector<uint8_t> long_bytes = bytes;
  long_bytes.push_back(0);
  const Status extra = decode(long_bytes, &read);
  REQUIRE_FALSE(extra.is_ok());
  CHECK_THAT(extra.message(), Catch::Contains("1 bytes left over"));
}

TEST_CASE("autotune: grids hold the start and respect the shared-memory slot", "[autotune]") {
  AutotuneOptions options;
  options.shm = true;
  options.shm_slot_bytes = 1 * kMiB;
  const TunedSettings start{3 * kMiB, 0, 256 * kKiB, 1 * kMiB};
  const auto grids = autotune_grids(start, options);
  REQUIRE(grids.size() == 4);
  CHECK(grids[0] == std::vector<int64_t>{1 * kMiB, 2 * kMiB, 3 * kMiB, 4 * kMiB, 8 * kMiB,
                                         16 * kMiB, 32 * kMiB, 64 * kMiB});
  // 0 is "no limit": past every limit.
  CHECK(grids[1].back() == 0);
  CHECK(grids[1].front() == 64 * kKiB);
  CHECK(grids[2] == std::vector<int64_t>{64 * kKiB, 128 * kKiB, 256 * kKiB, 512 * kKiB, 1 * kMiB});
  options.shm = false;
  CHECK(autotune_grids(start, options)[2] == std::vector<int64_t>{256 * kKiB});
}

namespace {

// The step time of a simulated job: 1 s plus 50 ms per octave between each
// setting and its best value (16 MiB, 1 MiB, 128 KiB, 512 KiB).
double step_seconds(const TunedSettings& s) {
  const auto octaves = [](int64_t value, int64_t best) {
    // "No limit" counts as 8 MiB, an octave above the grid's last limit.
    const double v = static_cast<double>(value == 0 ? 8 * kMiB : value);
    return std::abs(std::log2(v / static_cast<double>(best)));
  };
  return 1.0 + 0.05 * (octaves(s.fusion_threshold_bytes, 16 * kMiB) +
                       octaves(s.fusion_max_tensor_bytes, 1 * kMiB) +
                       octaves(s.shm_chunk_bytes, 128 * kKiB) +
                       octaves(s.ring_segment_bytes, 512 * kKiB));
}

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("autotune: a simulated job is tuned to its fastest settings and logged", "[autotune]") {
  char pattern[] = "/tmp/herd_autotune_unit_XXXXXX";
  REQUIRE(mkdtemp(pattern) != nullptr);
  const std::string dir = pattern;
  const std::string log = dir + "/trials.csv";

  AutotuneOptions options;
  options.warmup_samples = 2;
  options.steps_per_sample = 3;
  options.log_path = log;
  options.shm = true;
  options.shm_slot_bytes = 1 * kMiB;
  const TunedSettings defaults{4 * kMiB, 256 * kKiB, 256 * kKiB, 1 * kMiB};
  Autotuner rank0(defaults, options, /*decides=*/true);
  REQUIRE(rank0.log_error().empty());

  constexpr int64_t kStepBytes = 100 * kMiB;
  TunedSettings current = defaults;
  auto now = Autotuner::Clock::now();
  uint64_t cycle = 0;
  std::vector<std::pair<uint64_t, TunedSettings>> applied;
  AutotuneDecision last;
  // One step is two cycles, each taking half the step; a decision pending
  // after a cycle is applied at the next, as the background loop does.
  const auto run_cycle = [&](const std::vector<std::string>& names) {
    ++cycle;
    if (rank0.decision_pending()) {
      last = rank0.take_decision();
      CHECK_FALSE(rank0.decision_pending());
      rank0.applied(last, cycle, now);
      current = last.settings;
      applied.emplace_back(cycle, current);
    }
    now += std::chrono::duration_cast<Autotuner::Clock::duration>(
        std::chrono::duration<double>(step_seconds(current) / 2));
    rank0.record(names, kStepBytes / 2, now);
  };
  while (!rank0.finished()) {
    REQUIRE(cycle < 100000);
    run_cycle({"conv1", "fc"});
    run_cycle({"conv2"});
  }
  const TunedSettings best{16 * kMiB, 1 * kMiB, 128 * kKiB, 512 * kKiB};
  CHECK(current == best);
  CHECK(last.final);
  CHECK(last.best_score == Approx(kStepBytes / step_seconds(best)).epsilon(1e-6));

  // One row per trial (the settings applied at its cycle, its score as the
  // simulated step time gives it), then the best.
  const std::vector<std::string> lines = lines_of(log);
  REQUIRE(lines.size() == applied.size() + 2);
  CHECK(lines[0] ==
        "trial,cycle,fusion_threshold_bytes,fusion_max_tensor_bytes,shm_chunk_bytes,"
        "ring_segment_bytes,score_bytes_per_second");
  std::vector<std::pair<uint64_t, TunedSettings>> trials = {{0, defaults}};
  trials.insert(trials.end(), applied.begin(), applied.end() - 1);
  for (std::size_t i = 0; i < trials.size(); ++i) {
    const TunedSettings& s = trials[i].second;
    std::istringstream row(lines[i + 1]);
    std::vector<std::string> fields;
    for (std::string field; std::getline(row, field, ',');) fields.push_back(field);
    REQUIRE(fields.size() == 7);
    CHECK(fields[0] == std::to_string(i));
    CHECK(fields[1] == std::to_string(trials[i].first));
    CHECK(fields[2] == std::to_string(s.fusion_threshold_bytes));
    CHECK(fields[3] == std::to_string(s.fusion_max_tensor_bytes));
    CHECK(fields[4] == std::to_string(s.shm_chunk_bytes));
    CHECK(fields[5] == std::to_string(s.ring_segment_bytes));
    CHECK(std::stod(fields[6]) == Approx(kStepBytes / step_seconds(s)).epsilon(1e-6));
  }
  CHECK(lines.back().rfind("best," + std::to_string(applied.back().first) +
                               ",16777216,1048576,"
                               "131072,524288,",
                           0) == 0);
  std::remove(log.c_str());
  rmdir(dir.c_str());
}

TEST_CASE("autotune: an unwritable log is reported, not fatal", "[autotune]") {
  AutotuneOptions options;
  options.log_path = "/nonexistent_herd_dir/trials.csv";
  Autotuner tuner(TunedSettings{4 * kMiB, 256 * kKiB, 256 * kKiB, 1 * kMiB}, options, true);
  CHECK_THAT(tuner.log_error(),
             Catch::Contains("cannot open the autotune log '/nonexistent_herd_dir/trials.csv'"));
}

}  // namespace herd::detail
