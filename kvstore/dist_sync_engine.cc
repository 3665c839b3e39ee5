// The dist_sync and dist_device_sync engine (kvstore/engines.h): every worker
// keeps a replica of the whole store. A push allreduces (sums) each key's
// merged value over the workers and applies the sum to the local replica.
// herd's CPU allreduce folds the ranks' values in one fixed order, so every
// worker receives bitwise the same sum; every replica starts from rank 0's
// init value and runs the same deterministic update, so the replicas stay
// bitwise equal: upstream's server-side update, run on every worker.
#include <fmt/format.h>

#include <cstring>
#include <map>

#include "herd/error.h"
#include "herd/herd.h"
#include "kvstore/collective_batch.h"
#include "kvstore/compressed_allreduce.h"
#include "kvstore/engines.h"
#include "kvstore/optimizer_config_codec.h"
#include "kvstore/update_store.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

Tensor copy_of(const TensorView& view) {
  Tensor copy(view.dtype, view.shape);
  if (view.num_bytes() > 0) std::memcpy(copy.data(), view.data, view.num_bytes());
  return copy;
}

// FNV-1a over the config's fields: equal configs give equal hashes on every
// worker; 0 is kept for "no valid config".
int64_t config_hash(const OptimizerConfig& config) {
  uint64_t hash = 14695981039346656037ull;
  for (const auto& [field, value] : encode_optimizer_config(config)) {
    for (char c : field + "=" + value + ";") {
      hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
    }
  }
  return hash == 0 ? 1 : static_cast<int64_t>(hash);
}

class DistSyncEngine : public Engine {
 public:
  explicit DistSyncEngine(int store_number) : store_number_(store_number) {}

  int rank() const override { return herd::rank(); }
  int num_workers() const override { return herd::size(); }

  // Rank 0's values reach every worker; the barrier makes init a point every
  // worker has passed before any push, as upstream's.
  void init(const std::vector<KeyItem>& items) override {
    std::vector<Tensor> values;
    for (const KeyItem& item : items) values.push_back(copy_of(item.value));
    start_and_wait_all(items.size(), [&](std::size_t i) {
      return herd::broadcast_async(name("init", items[i].id), values[i].view(), 0);
    });
    for (std::size_t i = 0; i < items.size(); ++i) {
      store_.init(items[i].id, items[i].name, values[i].view());
    }
    herd::barrier();
  }

  // Starts every key's allreduce (herd fuses them) before waiting for any,
  // then applies the sums in the call's order.
  void push(const std::vector<KeyItem>& items, int /*priority*/) override {
    if (compression_.type != CompressionType::kNone) {
      sum_compressed_over_workers(items);
    } else {
      sum_over_workers(items);
    }
    for (const KeyItem& item : items) {
      store_.update(item.id, sum_of(item));
      stats_.pushes += 1;
    }
  }

  void pull(const std::vector<KeyItem>& items, int /*priority*/) override {
    for (const KeyItem& item : items) {
      store_.read(item.id, item.value);
      stats_.pulls += 1;
    }
  }

  void pushpull(const std::vector<KeyItem>& items, int priority) override {
    push(items, priority);
    pull(items, priority);
  }

  void set_optimizer(const OptimizerConfig& config) override;
  void set_updater(Updater updater) override { store_.set_updater(std::move(updater), {}); }
  void set_gradient_compression(const GradientCompression& compression) override {
    compression_ = parse_compression(compression.type, compression.threshold);
    residuals_.clear();
  }
  bool is_capable(const std::string& capability) const override {
    return capability == "optimizer";
  }
  void barrier() override { herd::barrier(); }
  // Every replica holds the same state, so any worker may save it, and every
  // worker loads the same file.
  void save_optimizer_states(const std::string& path, bool dump_optimizer) const override {
    store_.save_optimizer_states(path, dump_optimizer);
  }
  void load_optimizer_states(const std::string& path) override {
    store_.load_optimizer_states(path);
  }
  Stats stats() const override { return stats_; }
  std::vector<int64_t> update_counts() override { return {store_.update_count()}; }

 private:
  std::string name(const char* operation, int64_t id) const {
    return fmt::format("kvstore.{}.{}.{}", store_number_, operation, id);
  }
  // With the default updater (assign) the sum is the key's new value, so the
  // allreduce writes it into the store at once and the update copies nothing.
  bool assigns() const {
    return compression_.type == CompressionType::kNone && !store_.has_updater() &&
           !store_.has_optimizer();
  }
  TensorView sum_of(const KeyItem& item) {
    return assigns() ? store_.value(item.id) : sums_.at(item.id).view();
  }
  Tensor& sum_buffer(const KeyItem& item) {
    Tensor& sum = sums_[item.id];
    if (sum.dtype() != item.value.dtype || sum.shape() != item.value.shape) {
      sum.reset(item.value.dtype, item.value.shape);
    }
    return sum;
  }
  void sum_over_workers(const std::vector<KeyItem>& items);
  void sum_compressed_over_workers(const std::vector<KeyItem>& items);

  int store_number_;
  UpdateStore store_;
  std::map<int64_t, Tensor> sums_;  // per key: the allreduce's buffer, reused every push
  CompressionParams compression_;
  std::map<int64_t, std::vector<float>> residuals_;  // per key: this worker's error feedback
  Stats stats_;
};

// The merged value is the caller's and stays as it is: the allreduce reads
// it and writes the key's sum buffer (out of place, which costs herd no more
// than in place and saves copying the gradient first).
void DistSyncEngine::sum_over_workers(const std::vector<KeyItem>& items) {
  start_and_wait_all(items.size(), [&](std::size_t i) {
    const KeyItem& item = items[i];
    const TensorView sum = assigns() ? store_.value(item.id) : sum_buffer(item).view();
    add_ring_allreduce_bytes(stats_, static_cast<int64_t>(sum.num_bytes()), num_workers());
    return herd::allreduce_async(name("push", item.id), item.value, sum, ReduceOp::kSum);
  });
}

void DistSyncEngine::sum_compressed_over_workers(const std::vector<KeyItem>& items) {
  std::vector<CompressedItem> compressed;
  for (const KeyItem& item : items) {
    const int64_t n = item.value.num_elements();
    std::vector<float>& residual = residuals_[item.id];
    residual.resize(static_cast<std::size_t>(n), 0.0f);
    compressed.push_back(CompressedItem{name("push", item.id),
                                        static_cast<const float*>(item.value.data), residual.data(),
                                        n, sum_buffer(item).data_as<float>()});
    const int64_t bytes = compressed_bytes(compression_.type, n);
    stats_.bytes_sent += bytes;
    stats_.bytes_received += bytes * (num_workers() - 1);
  }
  compressed_allreduce(compression_, compressed);
}

// Collective: the workers' configs are compared (by hash, gathered from
// every worker) before any replica takes one, so that a worker with another
// optimizer fails every worker instead of splitting the replicas. An invalid
// config fails every worker too, after the gather, so none is left waiting.
void DistSyncEngine::set_optimizer(const OptimizerConfig& config) {
  std::string local_error;
  int64_t hash = 0;
  try {
    UpdateStore probe;
    probe.set_optimizer(config);
    hash = config_hash(config);
  } catch (const Error& e) {
    local_error = e.what();
  }
  Tensor mine(DataType::kInt64, {1});
  *mine.data_as<int64_t>() = hash;
  Tensor all;
  herd::allgather(fmt::format("kvstore.{}.set_optimizer", store_number_), mine.view(), &all);
  if (!local_error.empty()) throw Error(local_error);
  const int64_t* hashes = all.data_as<int64_t>();
  std::string invalid, different;
  for (int r = 0; r < num_workers(); ++r) {
    if (hashes[r] == 0) invalid += (invalid.empty() ? "" : ", ") + std::to_string(r);
    if (hashes[r] != hashes[0]) different += (different.empty() ? "" : ", ") + std::to_string(r);
  }
  if (!invalid.empty()) {
    throw Error(fmt::format("kvstore: set_optimizer: the optimizer of rank(s) {} is invalid there",
                            invalid));
  }
  if (!different.empty()) {
    throw Error(fmt::format(
        "kvstore: set_optimizer: rank(s) {} pass another optimizer than rank 0 (every worker's "
        "replica must run the same one); rank {} has {}",
        different, herd::rank(), describe_optimizer_config(config)));
  }
  store_.set_optimizer(config);
}

}  // namespace

// dist_sync and dist_device_sync differ in the facade only (the device merge).
std::unique_ptr<Engine> make_dist_sync_engine(const std::string& /*type*/, int store_number) {
  return std::make_unique<DistSyncEngine>(store_number);
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
