// The values of a store and the rule that updates them: the one piece shared
// by every engine that keeps values (local and device in the process,
// dist_sync on every worker's replica, dist_async on each server for the key
// slices it owns).
//
// An update is, per key: merged *= rescale_grad (optimizer only), then the
// user's updater, the optimizer (one herd::Optimizer per key, so each key
// keeps its own state and step count), or, with neither, assignment
// (stored = merged). Deterministic: the same updates in the same order give
// bitwise the same values, which is what keeps dist_sync's replicas equal.
//
// Single-threaded: the owner serialises calls (a server's update thread).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "herd/kvstore.h"
#include "herd/tensor.h"

namespace herd {
namespace kv {
namespace detail {

class UpdateStore {
 public:
  UpdateStore();
  ~UpdateStore();

  bool contains(int64_t id) const;
  // Copies `value` in as the key's first value; `name` is used in messages.
  // Throws herd::Error when the key already holds a value.
  void init(int64_t id, const std::string& name, const TensorView& value);
  // Applies `merged` (the key's dtype and element count) to the key.
  void update(int64_t id, const TensorView& merged);
  // Copies the key's value into `out`.
  void read(int64_t id, TensorView out) const;
  TensorView value(int64_t id);

  void set_optimizer(const OptimizerConfig& config);
  void set_updater(Updater updater, std::vector<Key> keys_by_id);
  bool has_optimizer() const;
  bool has_updater() const;

  // MXNet's num_update: the largest number of updates applied to any one key
  // (the schedule's t of an update is this count after raising the key's own
  // count, minus one).
  int64_t update_count() const;

  // The optimizer's per-key state in herd's checkpoint encoding.
  void save_optimizer_states(const std::string& path, bool dump_optimizer) const;
  void load_optimizer_states(const std::string& path);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace detail
}  // namespace kv
}  // namespace herd
