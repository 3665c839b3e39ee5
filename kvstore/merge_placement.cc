// The merge GPUs of a device type's keys (kvstore/merge_placement.h).
#include "kvstore/merge_placement.h"

#include <fmt/format.h>

#include <algorithm>

#include "herd/error.h"

namespace herd {
namespace kv {
namespace detail {

void MergePlacement::add_key(int64_t id, int64_t elements) { waiting_.emplace_back(id, elements); }

int MergePlacement::gpu_of(int64_t id, const std::vector<int>& gpus) {
  auto found = placed_.find(id);
  if (found != placed_.end()) return found->second;
  if (gpus.empty()) throw Error(fmt::format("kvstore: key id {} has no GPU to be summed on", id));
  std::stable_sort(waiting_.begin(), waiting_.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [key, elements] : waiting_) {
    int least = gpus.front();
    for (int gpu : gpus) {
      if (elements_on(gpu) < elements_on(least)) least = gpu;
    }
    placed_[key] = least;
    load_[least] += elements;
  }
  waiting_.clear();
  found = placed_.find(id);
  if (found == placed_.end()) {
    throw Error(fmt::format("kvstore: key id {} was never recorded for a merge GPU", id));
  }
  return found->second;
}

int64_t MergePlacement::elements_on(int gpu) const {
  auto it = load_.find(gpu);
  return it != load_.end() ? it->second : 0;
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
