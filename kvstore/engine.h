// The interface between the KVStore facade (kvstore.cc: key checks, string
// keys mapped to ints, summing a push's local values) and the engine of one
// store type (local, dist_sync, dist_async, horovod).
//
// The facade calls an engine with keys already checked (initialised, shapes
// and dtypes as at init, never mixed key types) and every push already
// reduced to one merged value per key; an engine moves and updates values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "herd/kvstore.h"

namespace herd {
namespace kv {
namespace detail {

// One key of a call, as an engine sees it. `id` is the int key, or the
// string key's index in init order (identical on every worker); `name` is
// Key::to_string() for messages.
struct KeyItem {
  int64_t id = 0;
  std::string name;
  TensorView value;  // the merged push, the init value, or the pull's output
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual int rank() const = 0;
  virtual int num_workers() const = 0;

  // The store's first value of each key: rank 0's value on distributed types.
  virtual void init(const std::vector<KeyItem>& items) = 0;
  // Applies each merged value to its key (updater, optimizer or assign).
  virtual void push(const std::vector<KeyItem>& items, int priority) = 0;
  // Writes each key's current value into its item's view.
  virtual void pull(const std::vector<KeyItem>& items, int priority) = 0;
  // push then pull of the same keys, in one round trip where the engine can:
  // `items[i].value` is the merged push, written over with the result.
  virtual void pushpull(const std::vector<KeyItem>& items, int priority) = 0;

  virtual void set_optimizer(const OptimizerConfig& config) = 0;
  virtual void set_updater(Updater updater) = 0;
  virtual void set_gradient_compression(const GradientCompression& compression) = 0;
  virtual bool is_capable(const std::string& capability) const = 0;
  virtual void barrier() = 0;
  virtual void save_optimizer_states(const std::string& path, bool dump_optimizer) const = 0;
  virtual void load_optimizer_states(const std::string& path) = 0;
  virtual Stats stats() const = 0;
  virtual std::vector<int64_t> update_counts() = 0;
};

}  // namespace detail
}  // namespace kv
}  // namespace herd
