#include "src/allreduce_chooser.h"

#include <algorithm>

namespace herd::detail {
namespace {

// Weight of the newest call in the estimate of the path that keeps running:
// half, so that one noisy call does not decide alone.
constexpr double kNewestWeight = 0.5;

std::size_t index(AllreducePath path) { return static_cast<std::size_t>(path); }

}  // namespace

const char* activity_name(AllreducePath path) {
  switch (path) {
    case AllreducePath::kShm: return "SHM_ALLREDUCE";
    case AllreducePath::kRing: return "RING_ALLREDUCE";
    case AllreducePath::kRecursiveDoubling: return "RECURSIVE_DOUBLING_ALLREDUCE";
    case AllreducePath::kHierarchical: return "HIERARCHICAL_ALLREDUCE";
  }
  return "ALLREDUCE";
}

int AllreduceChooser::size_class(std::size_t bytes) {
  int size_class = 0;
  while (bytes > 1 && size_class + 1 < kSizeClasses) {
    bytes >>= 1;
    ++size_class;
  }
  return size_class;
}

AllreducePath AllreduceChooser::fastest(const SizeClass& size_class,
                                        const std::vector<AllreducePath>& candidates) {
  AllreducePath best = candidates.front();
  double best_estimate = -1.0;
  for (AllreducePath path : candidates) {
    const double estimate = size_class.agreed[index(path)];
    if (estimate >= 0 && (best_estimate < 0 || estimate < best_estimate)) {
      best = path;
      best_estimate = estimate;
    }
  }
  return best;
}

int AllreduceChooser::decided_neighbour(int size_class,
                                        const std::vector<AllreducePath>& candidates) const {
  for (int neighbour : {size_class - 1, size_class + 1}) {
    if (neighbour < 0 || neighbour >= kSizeClasses) continue;
    const SizeClass& decided = classes_[static_cast<std::size_t>(neighbour)];
    if (std::all_of(candidates.begin(), candidates.end(),
                    [&](AllreducePath p) { return decided.agreed[index(p)] > 0; })) {
      return neighbour;
    }
  }
  return -1;
}

AllreducePath AllreduceChooser::preferred(const SizeClass& size_class,
                                          const std::vector<AllreducePath>& candidates) {
  for (AllreducePath path : candidates) {
    if (static_cast<int>(index(path)) == size_class.chosen) return path;
  }
  return fastest(size_class, candidates);
}

std::vector<AllreducePath> AllreduceChooser::in_likely_order(
    int size_class, const std::vector<AllreducePath>& candidates) const {
  std::vector<AllreducePath> ordered = candidates;
  for (int distance = 1; distance < kSizeClasses; ++distance) {
    for (int neighbour : {size_class - distance, size_class + distance}) {
      if (neighbour < 0 || neighbour >= kSizeClasses) continue;
      const SizeClass& decided = classes_[static_cast<std::size_t>(neighbour)];
      const bool measured = std::any_of(candidates.begin(), candidates.end(), [&](AllreducePath p) {
        return decided.agreed[index(p)] >= 0;
      });
      if (!measured) continue;
      const AllreducePath first = preferred(decided, candidates);
      std::stable_partition(ordered.begin(), ordered.end(),
                            [first](AllreducePath p) { return p == first; });
      return ordered;
    }
  }
  return ordered;
}

const AllreducePath* AllreduceChooser::next_in_round(const SizeClass& size_class,
                                                     const std::vector<AllreducePath>& ordered,
                                                     bool probing, AllreducePath skip) {
  for (const AllreducePath& path : ordered) {
    if (size_class.ran_in_round[index(path)]) continue;
    if (probing ? path != skip : size_class.agreed[index(path)] < 0) return &path;
  }
  return nullptr;
}

AllreduceChooser::Choice AllreduceChooser::choose(std::size_t bytes,
                                                  const std::vector<AllreducePath>& candidates) {
  if (candidates.size() == 1) return {candidates.front(), false};
  const int class_index = size_class(bytes);
  SizeClass& size_class = classes_[static_cast<std::size_t>(class_index)];
  const bool exploring = std::any_of(candidates.begin(), candidates.end(), [&](AllreducePath p) {
    return size_class.agreed[index(p)] < 0;
  });
  if (exploring) {
    const bool fresh = std::none_of(size_class.agreed.begin(), size_class.agreed.end(),
                                    [](double estimate) { return estimate >= 0; }) &&
                       std::none_of(size_class.ran_in_round.begin(), size_class.ran_in_round.end(),
                                    [](bool ran) { return ran; });
    const int neighbour = fresh ? decided_neighbour(class_index, candidates) : -1;
    if (neighbour >= 0) {
      const AllreducePath path =
          preferred(classes_[static_cast<std::size_t>(neighbour)], candidates);
      size_class.borrowed_from = neighbour;
      size_class.first_in_round = static_cast<int>(index(path));
      size_class.ran_in_round[index(path)] = true;
      return {path, true};
    }
    const std::vector<AllreducePath> ordered = in_likely_order(class_index, candidates);
    const AllreducePath* next = next_in_round(size_class, ordered, false, ordered.front());
    if (next != nullptr) {
      const AllreducePath path = *next;
      if (size_class.first_in_round < 0) size_class.first_in_round = static_cast<int>(index(path));
      size_class.ran_in_round[index(path)] = true;
      return {path, next_in_round(size_class, ordered, false, path) == nullptr};
    }
    // Every candidate ran in this round, which ends with a call of another
    // set of candidates: run the likeliest meanwhile.
    return {ordered.front(), false};
  }
  const AllreducePath best = preferred(size_class, candidates);
  if (!size_class.probing && ++size_class.calls_since_probe >= size_class.probe_interval) {
    size_class.probing = true;
    size_class.calls_since_probe = 0;
    size_class.ran_in_round = {};
  }
  if (size_class.probing) {
    const AllreducePath* next = next_in_round(size_class, candidates, true, best);
    if (next != nullptr) {
      const AllreducePath path = *next;
      size_class.ran_in_round[index(path)] = true;
      return {path, next_in_round(size_class, candidates, true, best) == nullptr};
    }
  }
  return {best, false};
}

void AllreduceChooser::record(std::size_t bytes, AllreducePath path, double seconds) {
  SizeClass& size_class = classes_[static_cast<std::size_t>(AllreduceChooser::size_class(bytes))];
  const double newest = seconds / static_cast<double>(std::max<std::size_t>(bytes, 1));
  double& measured = size_class.measured[index(path)];
  // A path run for a round stands for itself; the path that keeps running
  // smooths its estimate over its calls.
  const double before = measured >= 0 ? measured : size_class.agreed[index(path)];
  measured = size_class.ran_in_round[index(path)] || before < 0
                 ? newest
                 : kNewestWeight * newest + (1 - kNewestWeight) * before;
}

std::array<double, kAllreducePaths> AllreduceChooser::estimates(std::size_t bytes) const {
  const SizeClass& size_class =
      classes_[static_cast<std::size_t>(AllreduceChooser::size_class(bytes))];
  std::array<double, kAllreducePaths> estimates = size_class.agreed;
  for (std::size_t path = 0; path < kAllreducePaths; ++path) {
    if (size_class.measured[path] >= 0) estimates[path] = size_class.measured[path];
  }
  return estimates;
}

void AllreduceChooser::agree(std::size_t bytes, const std::array<double, kAllreducePaths>& agreed) {
  SizeClass& size_class = classes_[static_cast<std::size_t>(AllreduceChooser::size_class(bytes))];
  const std::vector<AllreducePath> all = {AllreducePath::kShm, AllreducePath::kRing,
                                          AllreducePath::kRecursiveDoubling,
                                          AllreducePath::kHierarchical};
  const int before = size_class.chosen;
  const int incumbent = before >= 0 ? before : size_class.first_in_round;
  size_class.agreed = agreed;
  if (size_class.borrowed_from >= 0) {
    // The path that ran gives the scale; what did not run keeps its place
    // relative to it in the neighbour.
    const SizeClass& neighbour = classes_[static_cast<std::size_t>(size_class.borrowed_from)];
    double scale = -1.0;
    for (std::size_t path = 0; path < kAllreducePaths; ++path) {
      if (size_class.ran_in_round[path] && agreed[path] >= 0 && neighbour.agreed[path] > 0) {
        scale = agreed[path] / neighbour.agreed[path];
      }
    }
    for (std::size_t path = 0; path < kAllreducePaths && scale >= 0; ++path) {
      if (agreed[path] < 0 && neighbour.agreed[path] >= 0) {
        size_class.agreed[path] = neighbour.agreed[path] * scale;
      }
    }
    size_class.borrowed_from = -1;
  }
  const auto& estimate = size_class.agreed;
  int chosen = static_cast<int>(index(fastest(size_class, all)));
  if (incumbent >= 0 && estimate[static_cast<std::size_t>(incumbent)] >= 0 &&
      estimate[static_cast<std::size_t>(chosen)] * (1 + kChooserSwitchMargin) >=
          estimate[static_cast<std::size_t>(incumbent)]) {
    chosen = incumbent;
  }
  size_class.chosen = chosen;
  size_class.first_in_round = -1;
  size_class.measured = unmeasured();
  size_class.ran_in_round = {};
  if (size_class.probing) {
    size_class.probing = false;
    size_class.probe_interval =
        chosen == before ? std::min(2 * size_class.probe_interval, kMaxChooserProbeInterval)
                         : kChooserProbeInterval;
  }
}

}  // namespace herd::detail
