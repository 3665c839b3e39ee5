// AllreduceChooser (src/allreduce_chooser.h) with injected timings: size
// classes by powers of two, one candidate never measured, each candidate run
// once in the caller's order with the agreement after the last, the fastest
// agreed estimate chosen unless the incumbent is within the margin, the
// others probed ever more rarely, a changed state followed, the running
// path's estimate smoothed, a class next to a decided one running its choice
// once and borrowing the rest, the nearest decided class's choice explored
// first otherwise, and two ranks fed different timings taking the same
// decisions once they agree on the minima; the same with the hierarchical
// allreduce among the candidates (a set spanning hosts: no shared-memory
// path), first or third in the caller's order.

#include <algorithm>
#include <array>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/allreduce_chooser.h"

namespace herd::detail {
namespace {

constexpr std::size_t kMiB = 1 << 20;
using Path = AllreducePath;
using Estimates = std::array<double, kAllreducePaths>;
const std::vector<Path> kAll = {Path::kShm, Path::kRing, Path::kRecursiveDoubling};
// A set across hosts from the hierarchical allreduce's size on, and below it.
const std::vector<Path> kHierarchicalFirst = {Path::kHierarchical, Path::kRing,
                                              Path::kRecursiveDoubling};
const std::vector<Path> kHierarchicalThird = {Path::kRecursiveDoubling, Path::kRing,
                                              Path::kHierarchical};
// Never measured.
constexpr double kNone = -1.0;

// Seconds per byte of each path, in the order of AllreducePath.
struct Timings {
  double shm, ring, recursive_doubling;
  double hierarchical = 0.0;
  double of(Path path) const {
    switch (path) {
      case Path::kShm: return shm;
      case Path::kRing: return ring;
      case Path::kRecursiveDoubling: return recursive_doubling;
      case Path::kHierarchical: return hierarchical;
    }
    return 0.0;
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
  CHECK(chooser.estimates(kMiB) == Estimates{3.0, 1.0, 2.0, kNone});

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
  CHECK(chooser.estimates(kMiB) == Estimates{3.0, 2.0, 2.0, kNone});
  call(chooser, kMiB, {3.0, 3.0, 2.0});
  CHECK(chooser.estimates(kMiB) == Estimates{3.0, 2.5, 2.0, kNone});
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
  CHECK(chooser.estimates(2 * kMiB) == Estimates{4.5, 1.5, 3.0, kNone});
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

TEST_CASE("allreduce chooser: the hierarchical allreduce explored first, measured, kept",
          "[chooser]") {
  CHECK(std::string(activity_name(Path::kHierarchical)) == "HIERARCHICAL_ALLREDUCE");
  AllreduceChooser chooser;
  const Timings hierarchical_fastest{kNone, 2.0, 3.0, 1.0};
  const AllreduceChooser::Choice first =
      call(chooser, kMiB, hierarchical_fastest, kHierarchicalFirst);
  const AllreduceChooser::Choice second =
      call(chooser, kMiB, hierarchical_fastest, kHierarchicalFirst);
  const AllreduceChooser::Choice third =
      call(chooser, kMiB, hierarchical_fastest, kHierarchicalFirst);
  CHECK(first.path == Path::kHierarchical);
  CHECK_FALSE(first.agree_after);
  CHECK(second.path == Path::kRing);
  CHECK_FALSE(second.agree_after);
  CHECK(third.path == Path::kRecursiveDoubling);
  CHECK(third.agree_after);
  // The fourth slot is the hierarchical allreduce's; shared memory was no
  // candidate and stays unmeasured.
  CHECK(chooser.estimates(kMiB) == Estimates{kNone, 2.0, 3.0, 1.0});
  // It runs until the probe round (calls 19 and 20) measures the others.
  std::vector<Path> paths;
  for (int64_t class_call = 4; class_call <= 22; ++class_call) {
    paths.push_back(call(chooser, kMiB, hierarchical_fastest, kHierarchicalFirst).path);
  }
  std::vector<Path> expected(15, Path::kHierarchical);  // calls 4..18
  expected.push_back(Path::kRing);                      // 19: probe
  expected.push_back(Path::kRecursiveDoubling);         // 20: probe, then agree
  expected.insert(expected.end(), 2, Path::kHierarchical);
  CHECK(paths == expected);
}

TEST_CASE("allreduce chooser: the hierarchical allreduce explored last, chosen when fastest",
          "[chooser]") {
  // Below its size the caller lists it third: it runs after the flat
  // algorithms and, fastest by more than the margin, replaces the first.
  AllreduceChooser chooser;
  std::vector<Path> explored;
  for (int i = 0; i < 3; ++i) {
    explored.push_back(call(chooser, 4096, {kNone, 2.0, 1.0, 0.5}, kHierarchicalThird).path);
  }
  CHECK(explored == kHierarchicalThird);
  CHECK(chooser.choose(4096, kHierarchicalThird).path == Path::kHierarchical);
  // Within the margin of the incumbent (explored first), recursive doubling
  // stays.
  AllreduceChooser close;
  for (int i = 0; i < 3; ++i) call(close, 4096, {kNone, 2.0, 1.0, 0.95}, kHierarchicalThird);
  CHECK(close.choose(4096, kHierarchicalThird).path == Path::kRecursiveDoubling);
}

TEST_CASE("allreduce chooser: a probe moves the choice to and from the hierarchical allreduce",
          "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 3; ++i) call(chooser, kMiB, {kNone, 1.0, 2.0, 3.0}, kHierarchicalFirst);
  // Explored first but slowest: the ring runs.
  CHECK(chooser.choose(kMiB, kHierarchicalFirst).path == Path::kRing);
  chooser.record(kMiB, Path::kRing, 1.0 * kMiB);
  // The network gets slower for the flat algorithms (another job's traffic):
  // the first probe round (calls 19, 20) switches to the hierarchical path,
  // and the next one, 16 calls on, confirms it.
  std::vector<Path> paths;
  for (int64_t class_call = 5; class_call <= 40; ++class_call) {
    paths.push_back(call(chooser, kMiB, {kNone, 4.0, 5.0, 3.0}, kHierarchicalFirst).path);
  }
  std::vector<Path> expected(14, Path::kRing);               // calls 5..18
  expected.push_back(Path::kHierarchical);                   // 19: probe
  expected.push_back(Path::kRecursiveDoubling);              // 20: probe, then agree
  expected.insert(expected.end(), 15, Path::kHierarchical);  // 21..35
  expected.push_back(Path::kRing);                           // 36: probe
  expected.push_back(Path::kRecursiveDoubling);              // 37: probe, then agree
  expected.insert(expected.end(), 3, Path::kHierarchical);   // 38..40
  CHECK(paths == expected);
  CHECK(chooser.estimates(kMiB)[static_cast<std::size_t>(Path::kHierarchical)] == 3.0);
}

TEST_CASE("allreduce chooser: a class next to one that chose the hierarchical allreduce borrows",
          "[chooser]") {
  AllreduceChooser chooser;
  for (int i = 0; i < 3; ++i) call(chooser, kMiB, {kNone, 2.0, 3.0, 1.0}, kHierarchicalFirst);
  // Class 21 runs the hierarchical allreduce once and scales the others by
  // its ratio, 0.5 / 1.0.
  const AllreduceChooser::Choice first =
      call(chooser, 2 * kMiB, {kNone, 9.0, 9.0, 0.5}, kHierarchicalFirst);
  CHECK(first.path == Path::kHierarchical);
  CHECK(first.agree_after);
  CHECK(chooser.estimates(2 * kMiB) == Estimates{kNone, 1.0, 1.5, 0.5});
  CHECK(chooser.choose(2 * kMiB, kHierarchicalFirst).path == Path::kHierarchical);
  // A new class two away explores with the nearest choice first, even where
  // the caller lists it last.
  CHECK(chooser.choose(kMiB / 4, kHierarchicalThird).path == Path::kHierarchical);
  CHECK(chooser.choose(kMiB / 4, kHierarchicalThird).path == Path::kRecursiveDoubling);
  CHECK(chooser.choose(kMiB / 4, kHierarchicalThird).path == Path::kRing);
}

TEST_CASE("allreduce chooser: ranks timing four paths differently decide alike", "[chooser]") {
  // Four ranks of a set across hosts: the hierarchical allreduce first from
  // 64 KiB, third below, as FusionExecutor lists them.
  std::array<AllreduceChooser, 4> ranks;
  std::mt19937 random(11);
  std::uniform_real_distribution<double> seconds_per_byte(1.0, 2.0);
  const std::vector<std::size_t> sizes = {4096, 40000, 65536, kMiB, 3 * kMiB};
  int64_t agreements = 0;
  std::array<int64_t, kAllreducePaths> runs{};
  for (int i = 0; i < 5000; ++i) {
    const std::size_t bytes = sizes[static_cast<std::size_t>(i) % sizes.size()];
    const std::vector<Path>& candidates = bytes >= 65536 ? kHierarchicalFirst : kHierarchicalThird;
    std::array<AllreduceChooser::Choice, 4> choices;
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      choices[r] = ranks[r].choose(bytes, candidates);
      ranks[r].record(bytes, choices[r].path,
                      seconds_per_byte(random) * static_cast<double>(bytes));
    }
    for (std::size_t r = 1; r < ranks.size(); ++r) {
      REQUIRE(choices[r].path == choices[0].path);
      REQUIRE(choices[r].agree_after == choices[0].agree_after);
    }
    ++runs[static_cast<std::size_t>(choices[0].path)];
    if (!choices[0].agree_after) continue;
    ++agreements;
    Estimates minima = ranks[0].estimates(bytes);
    for (std::size_t r = 1; r < ranks.size(); ++r) {
      const Estimates other = ranks[r].estimates(bytes);
      for (std::size_t p = 0; p < minima.size(); ++p) minima[p] = std::min(minima[p], other[p]);
    }
    // Shared memory is never a candidate here, so never measured.
    CHECK(minima[static_cast<std::size_t>(Path::kShm)] == kNone);
    for (AllreduceChooser& rank : ranks) rank.agree(bytes, minima);
  }
  CHECK(agreements > 5 * 5);
  CHECK(runs[static_cast<std::size_t>(Path::kShm)] == 0);
  for (Path path : kHierarchicalFirst) CHECK(runs[static_cast<std::size_t>(path)] > 10);
}

}  // namespace
}  // namespace herd::detail
