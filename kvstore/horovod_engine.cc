// The horovod engine (kvstore/engines.h): upstream's Horovod store, which
// keeps no values. pushpull is an allreduce(sum) of the merged value, in
// place; broadcast is herd's broadcast from rank 0. It has no optimizer, no
// updater, no compression and no saved state: a program updates its own
// weights with herd's optimizers after the pushpull.
#include <fmt/format.h>

#include "herd/error.h"
#include "herd/herd.h"
#include "kvstore/collective_batch.h"
#include "kvstore/engines.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

class HorovodEngine : public Engine {
 public:
  explicit HorovodEngine(int store_number) : store_number_(store_number) {}

  int rank() const override { return herd::rank(); }
  int num_workers() const override { return herd::size(); }

  // broadcast's first half: rank 0's value, in place in each item's buffer.
  void init(const std::vector<KeyItem>& items) override {
    start_and_wait_all(items.size(), [&](std::size_t i) {
      return herd::broadcast_async(name("broadcast", items[i].id), items[i].value, 0);
    });
  }
  void push(const std::vector<KeyItem>& /*items*/, int /*priority*/) override {
    refuse("push (use pushpull)");
  }
  void pull(const std::vector<KeyItem>& /*items*/, int /*priority*/) override {
    refuse("pull (use pushpull or broadcast)");
  }
  void pushpull(const std::vector<KeyItem>& items, int /*priority*/) override {
    start_and_wait_all(items.size(), [&](std::size_t i) {
      const KeyItem& item = items[i];
      stats_.pushes += 1;
      stats_.pulls += 1;
      add_ring_allreduce_bytes(stats_, static_cast<int64_t>(item.value.num_bytes()), num_workers());
      return herd::allreduce_async(name("pushpull", item.id), item.value, item.value,
                                   ReduceOp::kSum);
    });
  }

  void set_optimizer(const OptimizerConfig& /*config*/) override {
    refuse("set_optimizer (is_capable(\"optimizer\") is false: update the weights after pushpull)");
  }
  void set_updater(Updater /*updater*/) override {
    refuse("set_updater (it keeps no values to update)");
  }
  void set_gradient_compression(const GradientCompression& /*compression*/) override {
    refuse("gradient compression");
  }
  bool is_capable(const std::string& /*capability*/) const override { return false; }
  void barrier() override { herd::barrier(); }
  void save_optimizer_states(const std::string& /*path*/, bool /*dump*/) const override {
    refuse("save_optimizer_states (it has no optimizer)");
  }
  void load_optimizer_states(const std::string& /*path*/) override {
    refuse("load_optimizer_states (it has no optimizer)");
  }
  Stats stats() const override { return stats_; }
  std::vector<int64_t> update_counts() override { return {0}; }

 private:
  [[noreturn]] static void refuse(const std::string& what) {
    throw Error(fmt::format("kvstore: the horovod store has no {}", what));
  }
  std::string name(const char* operation, int64_t id) const {
    return fmt::format("kvstore.{}.{}.{}", store_number_, operation, id);
  }
  int store_number_;
  Stats stats_;
};

}  // namespace

std::unique_ptr<Engine> make_horovod_engine(int store_number) {
  return std::make_unique<HorovodEngine>(store_number);
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
