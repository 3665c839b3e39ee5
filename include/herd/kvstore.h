// herd's KVStore: MXNet's vocabulary for data-parallel training.
//
//   herd::init();
//   auto kv = herd::kv::create("dist_sync");
//   kv->init(3, weights);                  // rank 0's value reaches every worker
//   kv->set_optimizer(config);             // or set_updater(fn); default: assign
//   kv->push(3, {grad_on_dev0, grad_on_dev1});
//   kv->pull(3, {weights});
//
// Types (create(), MXNet's rules: the name is lower-cased, then matched by
// substring): a name containing "dist" is distributed, synchronous unless it
// also contains "_async"; "device" sums the local values of a push on a GPU in
// a CUDA build; "horovod" is herd's allreduce without a store; otherwise a
// name containing "local" is local, and any other name is refused (upstream
// falls back to local; herd names the types instead). See docs/kvstore.md:
//   local, device            one process; the store lives in this process
//   dist_sync, dist_device_sync
//                            every worker keeps a bitwise-equal replica,
//                            updated from herd's allreduce of the pushes
//   dist_async               parameter-server ranks (HERD_NUM_SERVERS): each
//                            push is applied by its server as it arrives
//   horovod                  pushpull = allreduce(sum); no store, no optimizer
//
// Semantics (as upstream): keys are ints or strings, never both in one store;
// every key is init()ed once before push or pull. A push of several values
// for one key (one per local device) sums them, then the store applies the
// updater to the stored value: by default the updater assigns, so without an
// optimizer a pull returns the sum of the pushes (summed over workers too on
// dist_sync). A call returns when its work is complete (its outputs written,
// its pushes applied or, on dist_async, acknowledged by the servers); the
// calls taking several keys start the work of every key before waiting for
// any, so a step should push all its gradients in one call.
//
// Every misuse throws herd::Error on the calling rank naming the key, the
// values involved and the store's type; a distributed failure (a dead server,
// a peer that stops answering) fails the call on every worker that can still
// be reached, naming the rank.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "herd/tensor.h"
#include "herd/train/lr_schedule.h"
#include "herd/train/optimizer.h"
#include "herd/types.h"

namespace herd {
namespace kv {

// An int or a string key.
class Key {
 public:
  Key(int key) : is_int_(true), int_(key) {}      // NOLINT: implicit, as MXNet's keys
  Key(int64_t key) : is_int_(true), int_(key) {}  // NOLINT
  Key(const char* key) : str_(key) {}             // NOLINT
  Key(std::string key) : str_(std::move(key)) {}  // NOLINT

  bool is_int() const { return is_int_; }
  int64_t int_key() const { return int_; }
  const std::string& str_key() const { return str_; }
  // The key as a message names it: 3, or "fc1.weight" in quotes.
  std::string to_string() const;

  bool operator==(const Key& other) const {
    return is_int_ == other.is_int_ && int_ == other.int_ && str_ == other.str_;
  }
  bool operator!=(const Key& other) const { return !(*this == other); }

 private:
  bool is_int_ = false;
  int64_t int_ = 0;
  std::string str_;
};

// The store's optimizer, as data, so that a dist_async worker can send it to
// the servers. The learning rate is the schedule's rate at t = the number of
// updates the store has applied before this one (MXNet's num_update minus
// one: the first update sees t = 0), counted over all keys (the largest
// per-key count; on dist_async, per server: every push counts).
struct OptimizerConfig {
  enum class Kind { kSGD, kAdam, kAdamW };
  Kind kind = Kind::kSGD;
  SGDOptions sgd;    // used when kind is kSGD
  AdamOptions adam;  // used when kind is kAdam or kAdamW (decoupled weight decay forced on)
  // When set, overrides sgd.lr / adam.lr at every update.
  std::optional<LrSchedule> schedule;
  // Every merged gradient is multiplied by this before the update (MXNet's
  // rescale_grad, e.g. 1 / batch size).
  double rescale_grad = 1.0;
};

// Called as updater(key, merged, stored): `merged` is the sum of the pushed
// values (over local devices, and over workers on dist_sync), `stored` the
// store's value to update in place. Host float32 or whatever dtype the key
// holds; the views are valid for the call only.
using Updater = std::function<void(const Key& key, const TensorView& merged, TensorView stored)>;

// Gradient compression (MXNet's set_gradient_compression): type "2bit" or
// "1bit" with a threshold (> 0 for 2bit), or "none". See docs/kvstore.md.
struct GradientCompression {
  std::string type = "none";
  double threshold = 0.5;
};

// Byte and call counters of one store in this process, for benchmarks.
struct Stats {
  int64_t pushes = 0;      // values pushed (one per key and call)
  int64_t pulls = 0;       // values pulled
  int64_t bytes_sent = 0;  // bytes this process sent for pushes and pulls
  int64_t bytes_received = 0;
};

class KVStore {
 public:
  struct Impl;
  explicit KVStore(std::unique_ptr<Impl> impl);
  ~KVStore();
  KVStore(const KVStore&) = delete;
  KVStore& operator=(const KVStore&) = delete;

  // The lower-cased name given to create().
  const std::string& type() const;
  // This worker's rank among the workers, and their number (parameter-server
  // ranks excluded); 0 and 1 for local and device.
  int rank() const;
  int num_workers() const;

  void init(const Key& key, TensorView value);
  void init(const std::vector<Key>& keys, const std::vector<TensorView>& values);

  void push(const Key& key, TensorView value, int priority = 0);
  void push(const Key& key, const std::vector<TensorView>& values, int priority = 0);
  void push(const std::vector<Key>& keys, const std::vector<std::vector<TensorView>>& values,
            int priority = 0);

  void pull(const Key& key, TensorView out, int priority = 0);
  void pull(const Key& key, const std::vector<TensorView>& outs, int priority = 0);
  void pull(const std::vector<Key>& keys, const std::vector<std::vector<TensorView>>& outs,
            int priority = 0);

  // push then pull; empty `outs` writes the result into `values`.
  void pushpull(const Key& key, const std::vector<TensorView>& values,
                const std::vector<TensorView>& outs = {}, int priority = 0);
  void pushpull(const std::vector<Key>& keys, const std::vector<std::vector<TensorView>>& values,
                const std::vector<std::vector<TensorView>>& outs = {}, int priority = 0);

  // init (rank 0's value) then pull into `outs`.
  void broadcast(const Key& key, TensorView value, const std::vector<TensorView>& outs,
                 int priority = 0);
  void broadcast(const std::vector<Key>& keys, const std::vector<TensorView>& values,
                 const std::vector<std::vector<TensorView>>& outs, int priority = 0);

  void set_optimizer(const OptimizerConfig& config);
  void set_updater(Updater updater);
  void set_gradient_compression(const GradientCompression& compression);

  // "optimizer": whether set_optimizer is supported (false for horovod).
  bool is_capable(const std::string& capability) const;

  // Returns when every worker has called it.
  void barrier();

  // The optimizer's per-key state (and, with dump_optimizer, its config),
  // in herd's checkpoint encoding. Only where the updates run in this
  // process (not dist_async, as upstream).
  void save_optimizer_states(const std::string& path, bool dump_optimizer = false) const;
  void load_optimizer_states(const std::string& path);

  Stats stats() const;
  // The number of updates each server has applied, servers in rank order
  // (dist_async); {updates applied by this process's store} otherwise.
  std::vector<int64_t> update_counts();

 private:
  std::unique_ptr<Impl> impl_;
};

// Makes a store of `type` (rules above). Distributed types need herd::init()
// first; every worker creates its stores in the same order. Throws
// herd::Error naming the type when it is unknown or cannot run in this job.
std::unique_ptr<KVStore> create(const std::string& type = "local");

}  // namespace kv
}  // namespace herd
