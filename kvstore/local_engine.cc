// The local and device engines: one process, the store in its memory
// (kvstore/engines.h). Summing a push's values (and, on device, compressing
// them) is the facade's; here each merged value is applied to the store.
#include <fmt/format.h>

#include "herd/error.h"
#include "kvstore/engines.h"
#include "kvstore/update_store.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

class LocalEngine : public Engine {
 public:
  int rank() const override { return 0; }
  int num_workers() const override { return 1; }

  void init(const std::vector<KeyItem>& items) override {
    for (const KeyItem& item : items) store_.init(item.id, item.name, item.value);
  }
  void push(const std::vector<KeyItem>& items, int /*priority*/) override {
    for (const KeyItem& item : items) {
      store_.update(item.id, item.value);
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

  void set_optimizer(const OptimizerConfig& config) override { store_.set_optimizer(config); }
  void set_updater(Updater updater) override { store_.set_updater(std::move(updater), {}); }
  // The facade compresses a device push's values before summing them; the
  // store itself holds only the sums.
  void set_gradient_compression(const GradientCompression& /*compression*/) override {}
  bool is_capable(const std::string& capability) const override {
    return capability == "optimizer";
  }
  // One worker: nothing to wait for.
  void barrier() override {}
  void save_optimizer_states(const std::string& path, bool dump_optimizer) const override {
    store_.save_optimizer_states(path, dump_optimizer);
  }
  void load_optimizer_states(const std::string& path) override {
    store_.load_optimizer_states(path);
  }
  Stats stats() const override { return stats_; }
  std::vector<int64_t> update_counts() override { return {store_.update_count()}; }

 private:
  UpdateStore store_;
  Stats stats_;
};

}  // namespace

// The type adds nothing here: local and device differ in the facade only.
std::unique_ptr<Engine> make_local_engine(const std::string& /*type*/) {
  return std::make_unique<LocalEngine>();
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
