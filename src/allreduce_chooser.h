// Which algorithm a CPU allreduce runs, chosen by measurement per size class
// and agreed by every rank before the call starts.
//
// Why measure: the shared-memory allreduce, the ring, recursive doubling and
// the hierarchical allreduce each win somewhere, and where depends on the
// machine (cores, caches, how far apart the ranks' cores are, the network,
// what else runs) more than on any threshold that could be fixed in advance.
// All give the same bits (collectives/reduction_order.h; the hierarchical
// allreduce is a candidate only where it does), so switching between calls
// changes no value.
//
// Why every rank agrees without a message per call: the ring and recursive
// doubling pair the ranks' sends and receives, so all ranks must run the same
// algorithm. Every rank runs the same allreduces in the same order, so the
// chooser's decisions are a function of that shared sequence and of
// estimates every rank holds alike: a size class first runs each candidate
// once (the exploration), in an order every rank computes alike; after the
// round's last call the ranks exchange what they measured (one small
// allreduce of the minima over ranks, which the caller runs when
// Choice::agree_after says so) and all take the same fastest candidate. The
// minimum, because a rank's time includes its wait for the ranks that
// started the call later (most in the first calls, whose negotiation reaches
// the ranks at different times), and the rank that started last waits least.
// The
// candidate that runs keeps being timed; every so often (the probe interval,
// doubling while the choice holds) the others run once each and the ranks
// agree again, so that a changed machine state is followed.
//
// The first calls of a size count (a training job reduces each size once per
// step), so exploring must be short and start with the likely winner. A class
// next to one already decided (half or twice its sizes) runs only that
// class's choice once and borrows the others' estimates from it, scaled by
// the ratio of the two classes' times for the path that ran; the first probe
// round measures them. Any other class explores every candidate, starting
// with the one chosen for the nearest size class already decided, else in
// the caller's order (shared memory or, from its size on, the hierarchical
// allreduce, then what the size threshold picks).
//
// Pure logic, used by FusionExecutor on the thread running the collectives.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace herd::detail {

enum class AllreducePath : uint8_t {
  kShm = 0,
  kRing = 1,
  kRecursiveDoubling = 2,
  // Shared memory inside each host, the network across hosts
  // (collectives/hierarchical_allreduce.h).
  kHierarchical = 3,
};
constexpr std::size_t kAllreducePaths = 4;

// The timeline's name of the path's activity (SHM_ALLREDUCE, ...).
const char* activity_name(AllreducePath path);

// The probe interval: the candidates not chosen run again after this many
// calls of their size class; a probe that confirms the choice doubles the
// wait for the next, up to kMaxChooserProbeInterval, and one that changes it
// starts again from here.
constexpr int64_t kChooserProbeInterval = 16;
constexpr int64_t kMaxChooserProbeInterval = 256;
// A candidate replaces the chosen one (or, at the end of an exploration, the
// one explored first) only when its agreed estimate is faster by more than
// this fraction, so that noise between near-equal candidates does not flip
// the choice back and forth.
constexpr double kChooserSwitchMargin = 0.1;

class AllreduceChooser {
 public:
  // What one call runs, and whether the ranks agree on their measurements
  // right after it (agreed_estimates() exchanged, then agree()).
  struct Choice {
    AllreducePath path;
    bool agree_after = false;
  };

  // The path for a call on `bytes` bytes among `candidates` (non-empty, no
  // repeats, the same on every rank for the same bytes, the likelier winner
  // first).
  Choice choose(std::size_t bytes, const std::vector<AllreducePath>& candidates);
  // What the call on `bytes` bytes that ran `path` took on this rank.
  void record(std::size_t bytes, AllreducePath path, double seconds);
  // This rank's seconds per byte of each path in the size class of `bytes`
  // (negative: never measured), for the exchange after a Choice with
  // agree_after.
  std::array<double, kAllreducePaths> estimates(std::size_t bytes) const;
  // The estimates every rank agreed on (the minima over ranks of
  // estimates()), after which every rank's decisions for the class agree.
  void agree(std::size_t bytes, const std::array<double, kAllreducePaths>& agreed);

  // Size classes: [2^k, 2^(k+1)) bytes is class k; 0 and 1 byte are class 0.
  static constexpr int kSizeClasses = 64;
  static int size_class(std::size_t bytes);

 private:
  struct SizeClass {
    // Seconds per byte every rank agreed on; negative: not measured.
    std::array<double, kAllreducePaths> agreed = unmeasured();
    // This rank's measurements since the last agreement; negative: none.
    std::array<double, kAllreducePaths> measured = unmeasured();
    // The paths run in the current exploration or probe round.
    std::array<bool, kAllreducePaths> ran_in_round{};
    bool probing = false;
    // The adjacent class whose estimates the current round borrows, or -1.
    int borrowed_from = -1;
    // The path chosen at the last agreement, and the first one run in the
    // current exploration; -1: none.
    int chosen = -1;
    int first_in_round = -1;
    int64_t calls_since_probe = 0;
    int64_t probe_interval = kChooserProbeInterval;
  };

  // An estimate for no path.
  static constexpr std::array<double, kAllreducePaths> unmeasured() {
    std::array<double, kAllreducePaths> estimates{};
    for (double& estimate : estimates) estimate = -1.0;
    return estimates;
  }
  // The candidate with the smallest agreed estimate, or the first.
  static AllreducePath fastest(const SizeClass& size_class,
                               const std::vector<AllreducePath>& candidates);
  // The chosen path where it is a candidate, else the fastest.
  static AllreducePath preferred(const SizeClass& size_class,
                                 const std::vector<AllreducePath>& candidates);
  // The class next to `size_class` that has agreed estimates for every
  // candidate, or -1.
  int decided_neighbour(int size_class, const std::vector<AllreducePath>& candidates) const;
  // `candidates` with the nearest decided class's choice first.
  std::vector<AllreducePath> in_likely_order(int size_class,
                                             const std::vector<AllreducePath>& candidates) const;
  // The first candidate neither agreed on nor run in this round (exploring),
  // or not run in this round (probing); null when none is left.
  static const AllreducePath* next_in_round(const SizeClass& size_class,
                                            const std::vector<AllreducePath>& ordered, bool probing,
                                            AllreducePath skip);

  std::array<SizeClass, kSizeClasses> classes_;
};

}  // namespace herd::detail
