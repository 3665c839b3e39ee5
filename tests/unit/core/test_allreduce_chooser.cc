// AllreduceChooser (src/allreduce_chooser.h) with injected timings: size
// classes by powers of two, one candidate never measured, each candidate run
// once in the caller's order with the agreement after the last, the fastest
// agreed estimate chosen unless the incumbent is within the margin, the
// others probed ever more rarely, a changed state followed, the running
// path's estimate smoothed, a class next to a decided one running its choice
// once and borrowing the rest, the nearest decided class's choice explored
// first otherwise, and two ranks fed different timings taking the same
// decisions once they agree on the minima.

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "src/allreduce_chooser.h"

namespace herd::detail {
namespace {

constexpr std::size_t kMiB = 1 << 20;
using Path = AllreducePath;
using Estimates = std::array<double, kAllreducePaths>;
const std::vector<Path> kAll = {Path::kShm, Path::kRing, Path::kRecursiveDoubling};

// Seconds per byte of each path, in the order of AllreducePath.
struct Timings {
  double shm, ring, recursive_doubling;
  double of(Path path) const {
    return path == Path::kShm ? shm : path == Path::kRing ? ring : recursive_doubling;
  }
};

// One call on one rank: chooses, records `timings` (seconds per byte) and
// agrees on this rank's own estimates when the choice says so.
AllreduceChooser::Choice call(AllreduceChooser& chooser, std::size_t bytes, Timings timings,
                              const std::vector<Path>& candidates = kAll) {
  const AllreduceChooser::Choice choice = chooser.choose(bytes, candidates);
  chooser.record(bytes, choice.path, timings.of(choice.path) * static_cast<double>(bytes));
  if (choice.agree_after) chooser.agree(bytes, chooser.estimates(bytes));
  return choice;
}

TEST_CASE("allreduce chooser: size classes by powers of two", "[chooser]") {
  CHECK(AllreduceChooser::size_class(0) == 0);
  CHECK(AllreduceChooser::size_class(1) == 0);
  CHECK(AllreduceChooser::size_class(2) == 1);
  CHECK(AllreduceChooser::size_class(3) == 1);
  CHECK(AllreduceChooser::size_class(4095) == 11);
  CHECK(AllreduceChooser::size_class(4096) == 12);
  CHECK(AllreduceChooser::size_class(kMiB) == 20);
  CHECK(AllreduceChooser::size_class(SIZE_MAX) == 63);
}

TEST_CASE("allreduce chooser: one candidate runs without measurement or agreement", "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 100; ++i) {
    const AllreduceChooser::Choice choice = chooser.choose(kMiB, {Path::kRing});
    CHECK(choice.path == Path::kRing);
    CHECK_FALSE(choice.agree_after);
  }
}

TEST_CASE("allreduce chooser: explores in order, takes the fastest, probes ever more rarely",
          "[chooser]") {
  AllreduceChooser chooser;
  const Timings ring_fastest{3.0, 1.0, 2.0};
  const AllreduceChooser::Choice first = call(chooser, kMiB, ring_fastest);
  const AllreduceChooser::Choice second = call(chooser, kMiB, ring_fastest);
  const AllreduceChooser::Choice third = call(chooser, kMiB, ring_fastest);
  CHECK(first.path == Path::kShm);
  CHECK_FALSE(first.agree_after);
  CHECK(second.path == Path::kRing);
  CHECK_FALSE(second.agree_after);
  CHECK(third.path == Path::kRecursiveDoubling);
  CHECK(third.agree_after);
  CHECK(chooser.estimates(kMiB) == Estimates{3.0, 1.0, 2.0});

  // The class's calls count from 1, the three first included; a probe round
  // runs the two others on consecutive calls and agrees after the second;
  // each that confirms the choice doubles the wait for the next, up to 256.
  std::vector<int64_t> probes;
  for (int64_t class_call = 4; class_call <= 1100; ++class_call) {
    const AllreduceChooser::Choice choice = call(chooser, kMiB, ring_fastest);
    if (choice.path == Path::kShm) {
      probes.push_back(class_call);
      CHECK_FALSE(choice.agree_after);
    } else if (choice.path == Path::kRecursiveDoubling) {
      CHECK(probes.back() == class_call - 1);
      CHECK(choice.agree_after);
    } else {
      CHECK_FALSE(choice.agree_after);
    }
  }
  CHECK(probes == std::vector<int64_t>{19, 52, 117, 246, 503, 760, 1017});
}

TEST_CASE("allreduce chooser: another path must be faster by the margin to replace the choice",
          "[chooser]") {
  AllreduceChooser chooser;
  // Explored first, shared memory stays within 10 % of the ring's 1.0.
  for (int i = 0; i < 3; ++i) call(chooser, kMiB, {1.1, 1.0, 2.0});
  CHECK(call(chooser, kMiB, {1.0, 0.95, 2.0}).path == Path::kShm);  // call 4
  // Beyond the margin, the ring wins.
  AllreduceChooser other;
  for (int i = 0; i < 3; ++i) call(other, kMiB, {1.125, 1.0, 2.0});
  CHECK(other.choose(kMiB, kAll).path == Path::kRing);
  // A probe must beat the running choice by the margin too: shared memory
  // keeps running at 1.0 while the probes measure 0.95 and 2.0.
  std::vector<Path> paths;
  for (int64_t class_call = 5; class_call <= 22; ++class_call) {
    paths.push_back(call(chooser, kMiB, {1.0, 0.95, 2.0}).path);
  }
  std::vector<Path> expected(14, Path::kShm);    // calls 5..18
  expected.push_back(Path::kRing);               // 19: probe
  expected.push_back(Path::kRecursiveDoubling);  // 20: probe, then agree
  expected.insert(expected.end(), 2, Path::kShm);
  CHECK(paths == expected);
}

TEST_CASE("allreduce chooser: the running path's estimate follows its calls", "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 3; ++i) call(chooser, kMiB, {3.0, 1.0, 2.0});
  // Half the newest call, half the estimate before.
  call(chooser, kMiB, {3.0, 3.0, 2.0});
  CHECK(chooser.estimates(kMiB) == Estimates{3.0, 2.0, 2.0});
  call(chooser, kMiB, {3.0, 3.0, 2.0});
  CHECK(chooser.estimates(kMiB) == Estimates{3.0, 2.5, 2.0});
}

TEST_CASE("allreduce chooser: a probe that finds another path faster switches to it", "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 3; ++i) call(chooser, kMiB, {3.0, 1.0, 2.0});
  // The ring slows down and shared memory speeds up: the ring keeps
  // running until the probe round (calls 19 and 20) measures the others.
  std::vector<Path> paths;
  for (int64_t class_call = 4; class_call <= 40; ++class_call) {
    paths.push_back(call(chooser, kMiB, {1.5, 4.0, 2.5}).path);
  }
  std::vector<Path> expected(15, Path::kRing);      // calls 4..18
  expected.push_back(Path::kShm);                   // 19: probe
  expected.push_back(Path::kRecursiveDoubling);     // 20: probe, then agree
  expected.insert(expected.end(), 15, Path::kShm);  // 21..35
  expected.push_back(Path::kRing);                  // 36: the interval starts again at 16
  expected.push_back(Path::kRecursiveDoubling);     // 37
  expected.insert(expected.end(), 3, Path::kShm);   // 38..40
  CHECK(paths == expected);
}

TEST_CASE(
    "allreduce chooser: a class next to a decided one runs its choice once and borrows the rest",
    "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 3; ++i) call(chooser, kMiB, {3.0, 1.0, 2.0});  // class 20: the ring
  // Class 21: the ring once, agreed at once; the others scaled by 1.5 / 1.0.
  const AllreduceChooser::Choice first = call(chooser, 2 * kMiB, {0.5, 1.5, 0.25});
  CHECK(first.path == Path::kRing);
  CHECK(first.agree_after);
  CHECK(chooser.estimates(2 * kMiB) == Estimates{4.5, 1.5, 3.0});
  // The ring runs on; the first probe round, 16 calls on, finds recursive
  // doubling faster here.
  std::vector<Path> paths;
  for (int64_t class_call = 2; class_call <= 20; ++class_call) {
    paths.push_back(call(chooser, 2 * kMiB, {0.5, 1.5, 0.25}).path);
  }
  std::vector<Path> expected(15, Path::kRing);   // calls 2..16
  expected.push_back(Path::kShm);                // 17: probe
  expected.push_back(Path::kRecursiveDoubling);  // 18: probe, then agree
  expected.insert(expected.end(), 2, Path::kRecursiveDoubling);
  CHECK(paths == expected);
  // Class 19 borrows too; class 18, two away, explores every candidate.
  CHECK(chooser.choose(kMiB / 2, kAll).path == Path::kRing);
  CHECK(chooser.choose(kMiB / 4, kAll).path == Path::kRing);
  CHECK(chooser.choose(kMiB / 4, kAll).path == Path::kShm);
  CHECK(chooser.choose(kMiB / 4, kAll).path == Path::kRecursiveDoubling);
}

TEST_CASE("allreduce chooser: a new size class explores the nearest decided class's choice first",
          "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 3; ++i) call(chooser, 4096, {1.0, 3.0, 2.0});       // class 12: shm
  for (int i = 0; i < 3; ++i) call(chooser, 64 * kMiB, {3.0, 2.0, 1.0});  // class 26: doubling
  // Class 20 is nearer to 26; class 14 nearer to 12; class 19, 7 away from
  // both, takes the smaller.
  CHECK(chooser.choose(kMiB, kAll).path == Path::kRecursiveDoubling);
  CHECK(chooser.choose(kMiB, kAll).path == Path::kShm);
  CHECK(chooser.choose(kMiB, kAll).path == Path::kRing);
  CHECK(chooser.choose(16 * 1024, kAll).path == Path::kShm);
  CHECK(chooser.choose(16 * 1024, kAll).path == Path::kRing);
  CHECK(chooser.choose(kMiB / 2, kAll).path == Path::kShm);
  // Among this call's candidates only: shared memory does not serve it.
  CHECK(chooser.choose(2 * 1024, {Path::kRing, Path::kRecursiveDoubling}).path ==
        Path::kRecursiveDoubling);
}

TEST_CASE("allreduce chooser: ranks timing differently decide alike after agreeing", "[chooser]") {
  std::array<AllreduceChooser, 2> ranks;
  std::mt19937 random(7);
  std::uniform_real_distribution<double> seconds_per_byte(1.0, 2.0);
  const std::vector<std::size_t> sizes = {4096, 6000, kMiB, 3 * kMiB};
  int64_t agreements = 0;
  std::vector<int> switches(sizes.size(), 0);
  std::vector<Path> last(sizes.size(), Path::kShm);
  for (int i = 0; i < 4000; ++i) {
    const std::size_t which = static_cast<std::size_t>(i) % sizes.size();
    const std::size_t bytes = sizes[which];
    // Shared memory serves only up to 4 KiB here, as HERD_SHM_ALLREDUCE_BYTES can say.
    const std::vector<Path> candidates =
        bytes <= 4096 ? kAll : std::vector<Path>{Path::kRing, Path::kRecursiveDoubling};
    std::array<AllreduceChooser::Choice, 2> choices;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      choices[r] = ranks[r].choose(bytes, candidates);
      ranks[r].record(bytes, choices[r].path,
                      seconds_per_byte(random) * static_cast<double>(bytes));
    }
    REQUIRE(choices[0].path == choices[1].path);
    REQUIRE(choices[0].agree_after == choices[1].agree_after);
    if (choices[0].path != last[which]) ++switches[which];
    last[which] = choices[0].path;
    if (!choices[0].agree_after) continue;
    ++agreements;
    Estimates minima = ranks[0].estimates(bytes);
    const Estimates other = ranks[1].estimates(bytes);
    for (std::size_t p = 0; p < minima.size(); ++p) minima[p] = std::min(minima[p], other[p]);
    for (AllreduceChooser& rank : ranks) rank.agree(bytes, minima);
  }
  CHECK(agreements > 4 * 5);
  for (int count : switches) CHECK(count > 2);
}

}  // namespace
}  // namespace herd::detail
