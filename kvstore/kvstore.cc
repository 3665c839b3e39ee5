// The KVStore facade (include/herd/kvstore.h): the type rules of create(),
// the checks every call makes before any engine or collective runs (so a
// misuse fails on the rank that made it, naming the key, the values and the
// store's type), string keys mapped to ids, and a push's values summed into
// one merged value per key. The engines (kvstore/engines.h) move and update
// the merged values.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <unordered_map>

#include "herd/error.h"
#include "herd/herd.h"
#include "kvstore/dist_async_engine.h"
#include "kvstore/engines.h"
#include "kvstore/merge.h"

namespace herd {
namespace kv {

namespace {

std::string describe(const TensorView& view) {
  return fmt::format("{} {}", to_string(view.dtype), shape_to_string(view.shape));
}

bool contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

struct KVStore::Impl {
  struct KeyInfo {
    DataType dtype;
    std::vector<int64_t> shape;
  };
  enum class KeyKind { kNone, kInt, kString };

  std::string type;
  bool device_merge = false;  // "device" in the type: a push's values may be compressed
  bool keeps_values = true;   // false for horovod: no init, push or pull
  KeyKind key_kind = KeyKind::kNone;
  std::unordered_map<std::string, int64_t> string_ids;
  std::vector<Key> string_keys;  // by id
  std::unordered_map<int64_t, KeyInfo> initialised;
  CompressionParams compression;
  std::map<int64_t, std::vector<std::vector<float>>> device_residuals;  // per key, per value
  std::map<int64_t, Tensor> merge_buffers;                              // per key, reused
  std::unique_ptr<detail::Engine> engine;  // last: destroyed before the tables its updater reads

  [[noreturn]] void fail(const std::string& message) const {
    throw Error(fmt::format("kvstore '{}': {}", type, message));
  }

  // Runs an engine call; its errors get the store's type in front.
  template <typename Call>
  void guarded(Call call) const {
    try {
      call();
    } catch (const Error& e) {
      std::string message = e.what();
      const std::string prefix = "kvstore: ";
      if (message.compare(0, prefix.size(), prefix) == 0) message.erase(0, prefix.size());
      fail(message);
    }
  }

  void check_key_kind(const std::vector<Key>& keys) const;
  std::vector<int64_t> ids_for_init(const std::vector<Key>& keys, const char* operation) const;
  std::vector<int64_t> ids_of(const std::vector<Key>& keys, const char* operation) const;
  void register_keys(const std::vector<Key>& keys, const std::vector<int64_t>& ids,
                     const std::vector<TensorView>& values);
  void check_values(const char* operation, const Key& key, int64_t id,
                    const std::vector<TensorView>& values, const char* what) const;
  void check_compressible(const Key& key, int64_t id) const;
  TensorView merge(int64_t id, const std::vector<TensorView>& values, bool copy_single);
  Key user_key(int64_t id) const {
    return key_kind == KeyKind::kString ? string_keys.at(static_cast<std::size_t>(id)) : Key(id);
  }
};

// MXNet's rule: one store holds int keys or string keys, never both.
void KVStore::Impl::check_key_kind(const std::vector<Key>& keys) const {
  KeyKind kind = key_kind;
  for (const Key& key : keys) {
    const KeyKind this_kind = key.is_int() ? KeyKind::kInt : KeyKind::kString;
    if (kind != KeyKind::kNone && kind != this_kind) {
      fail(fmt::format("Mixed key types are not allowed: the store's keys are {}, key {} is {}",
                       kind == KeyKind::kInt ? "ints" : "strings", key.to_string(),
                       key.is_int() ? "an int" : "a string"));
    }
    kind = this_kind;
  }
}

// Ids for keys not seen before: an int key is its own id; a string key gets
// the next index in first-use order, the same on every worker that uses its
// keys in the same order.
std::vector<int64_t> KVStore::Impl::ids_for_init(const std::vector<Key>& keys,
                                                 const char* operation) const {
  check_key_kind(keys);
  std::vector<int64_t> ids;
  std::set<int64_t> in_call;
  int64_t next_string_id = static_cast<int64_t>(string_keys.size());
  for (const Key& key : keys) {
    int64_t id;
    if (key.is_int()) {
      id = key.int_key();
    } else {
      auto it = string_ids.find(key.str_key());
      id = it != string_ids.end() ? it->second : -1;
      if (id < 0) {
        // A new string key given twice in this call gets its first id, so
        // the repeat is caught below.
        for (std::size_t i = 0; i < ids.size(); ++i) {
          if (!keys[i].is_int() && keys[i].str_key() == key.str_key()) id = ids[i];
        }
        if (id < 0) id = next_string_id++;
      }
    }
    if (!in_call.insert(id).second) {
      fail(fmt::format("{}: key {} appears twice in one call (pass its values as one list)",
                       operation, key.to_string()));
    }
    if (keeps_values && initialised.count(id)) {
      fail(fmt::format("{}: key {} is already initialised (init each key once)", operation,
                       key.to_string()));
    }
    ids.push_back(id);
  }
  return ids;
}

// Ids of keys that must have been initialised (any key on horovod, which
// keeps none: it gets an id at first use).
std::vector<int64_t> KVStore::Impl::ids_of(const std::vector<Key>& keys,
                                           const char* operation) const {
  // ids_for_init numbers new string keys; known ones keep their ids.
  if (!keeps_values) return ids_for_init(keys, operation);
  check_key_kind(keys);
  std::vector<int64_t> ids;
  std::set<int64_t> in_call;
  for (const Key& key : keys) {
    int64_t id = key.is_int() ? key.int_key() : -1;
    if (!key.is_int()) {
      auto it = string_ids.find(key.str_key());
      if (it != string_ids.end()) id = it->second;
    }
    if ((!key.is_int() && id < 0) || !initialised.count(id)) {
      fail(fmt::format("{} of key {}, which was never initialised (call init first)", operation,
                       key.to_string()));
    }
    if (!in_call.insert(id).second) {
      fail(fmt::format("{}: key {} appears twice in one call (pass its values as one list)",
                       operation, key.to_string()));
    }
    ids.push_back(id);
  }
  return ids;
}

void KVStore::Impl::register_keys(const std::vector<Key>& keys, const std::vector<int64_t>& ids,
                                  const std::vector<TensorView>& values) {
  for (std::size_t i = 0; i < keys.size(); ++i) {
    key_kind = keys[i].is_int() ? KeyKind::kInt : KeyKind::kString;
    if (!keys[i].is_int() && !string_ids.count(keys[i].str_key())) {
      string_ids.emplace(keys[i].str_key(), ids[i]);
      string_keys.push_back(keys[i]);
    }
    if (keeps_values) initialised[ids[i]] = KeyInfo{values[i].dtype, values[i].shape};
  }
}

// Every value of a key: host memory, and the key's dtype and shape (those
// of its init value; on horovod, those of the list's first value).
void KVStore::Impl::check_values(const char* operation, const Key& key, int64_t id,
                                 const std::vector<TensorView>& values, const char* what) const {
  if (values.empty()) {
    fail(fmt::format("{} of key {}: no {} given", operation, key.to_string(), what));
  }
  auto it = initialised.find(id);
  const KeyInfo expected =
      it != initialised.end() ? it->second : KeyInfo{values[0].dtype, values[0].shape};
  for (std::size_t i = 0; i < values.size(); ++i) {
    const TensorView& v = values[i];
    if (v.device.type != DeviceType::kCPU) {
      fail(fmt::format("{} of key {}: {} {} of {} is on {}; the KVStore takes host memory",
                       operation, key.to_string(), what, i, values.size(), to_string(v.device)));
    }
    if (v.dtype != expected.dtype || v.shape != expected.shape) {
      fail(fmt::format("{} of key {}: {} {} of {} is {}; the key holds {} {}", operation,
                       key.to_string(), what, i, values.size(), describe(v),
                       to_string(expected.dtype), shape_to_string(expected.shape)));
    }
    if (v.data == nullptr && v.num_elements() > 0) {
      fail(fmt::format("{} of key {}: {} {} of {} has no data", operation, key.to_string(), what, i,
                       values.size()));
    }
  }
}

// As upstream: compressed pushes are float32 only.
void KVStore::Impl::check_compressible(const Key& key, int64_t id) const {
  if (compression.type == CompressionType::kNone) return;
  const KeyInfo& info = initialised.at(id);
  if (info.dtype != DataType::kFloat32) {
    fail(
        fmt::format("push of key {}: gradient compression ({}) takes float32 values; the key "
                    "holds {}",
                    key.to_string(), to_string(compression.type), to_string(info.dtype)));
  }
}

// The push's values summed in list order. A single value is passed through
// (the engines do not write into a push's value) unless `copy_single` asks
// for a buffer the caller may overwrite. Compression on a device type
// quantizes each of several values with its own residual first, as
// upstream's device reduce does.
TensorView KVStore::Impl::merge(int64_t id, const std::vector<TensorView>& values,
                                bool copy_single) {
  if (values.size() == 1 && !copy_single) return values[0];
  Tensor& buffer = merge_buffers[id];
  if (buffer.dtype() != values[0].dtype || buffer.shape() != values[0].shape) {
    buffer.reset(values[0].dtype, values[0].shape);
  }
  if (device_merge && compression.type != CompressionType::kNone && values.size() > 1) {
    auto& residuals = device_residuals[id];
    residuals.resize(values.size());
    for (auto& residual : residuals) {
      residual.resize(static_cast<std::size_t>(buffer.num_elements()), 0.0f);
    }
    detail::sum_compressed(compression, values, residuals, buffer.view());
  } else {
    detail::sum_values(values, buffer.view());
  }
  return buffer.view();
}

KVStore::KVStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KVStore::~KVStore() = default;

const std::string& KVStore::type() const { return impl_->type; }
int KVStore::rank() const { return impl_->engine->rank(); }
int KVStore::num_workers() const { return impl_->engine->num_workers(); }

void KVStore::init(const Key& key, TensorView value) {
  init(std::vector<Key>{key}, std::vector<TensorView>{value});
}

void KVStore::init(const std::vector<Key>& keys, const std::vector<TensorView>& values) {
  Impl& s = *impl_;
  if (!s.keeps_values) s.fail("has no init (it keeps no values): use broadcast or pushpull");
  if (keys.size() != values.size()) {
    s.fail(fmt::format("init: {} keys but {} values", keys.size(), values.size()));
  }
  const std::vector<int64_t> ids = s.ids_for_init(keys, "init");
  std::vector<detail::KeyItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    s.check_values("init", keys[i], ids[i], {values[i]}, "value");
    items.push_back({ids[i], keys[i].to_string(), values[i]});
  }
  s.guarded([&] { s.engine->init(items); });
  s.register_keys(keys, ids, values);
}

void KVStore::push(const Key& key, TensorView value, int priority) {
  push(std::vector<Key>{key}, {{value}}, priority);
}

void KVStore::push(const Key& key, const std::vector<TensorView>& values, int priority) {
  push(std::vector<Key>{key}, {values}, priority);
}

void KVStore::push(const std::vector<Key>& keys, const std::vector<std::vector<TensorView>>& values,
                   int priority) {
  Impl& s = *impl_;
  if (!s.keeps_values) s.fail("has no push (it keeps no values): use pushpull");
  if (keys.size() != values.size()) {
    s.fail(fmt::format("push: {} keys but {} value lists", keys.size(), values.size()));
  }
  const std::vector<int64_t> ids = s.ids_of(keys, "push");
  for (std::size_t i = 0; i < keys.size(); ++i) {
    s.check_values("push", keys[i], ids[i], values[i], "value");
    s.check_compressible(keys[i], ids[i]);
  }
  std::vector<detail::KeyItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    items.push_back({ids[i], keys[i].to_string(), s.merge(ids[i], values[i], false)});
  }
  s.guarded([&] { s.engine->push(items, priority); });
}

void KVStore::pull(const Key& key, TensorView out, int priority) {
  pull(std::vector<Key>{key}, {{out}}, priority);
}

void KVStore::pull(const Key& key, const std::vector<TensorView>& outs, int priority) {
  pull(std::vector<Key>{key}, {outs}, priority);
}

// Each key is read once, into its first output, then copied to the others.
void KVStore::pull(const std::vector<Key>& keys, const std::vector<std::vector<TensorView>>& outs,
                   int priority) {
  Impl& s = *impl_;
  if (!s.keeps_values) s.fail("has no pull (it keeps no values): use pushpull or broadcast");
  if (keys.size() != outs.size()) {
    s.fail(fmt::format("pull: {} keys but {} output lists", keys.size(), outs.size()));
  }
  const std::vector<int64_t> ids = s.ids_of(keys, "pull");
  std::vector<detail::KeyItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    s.check_values("pull", keys[i], ids[i], outs[i], "output");
    items.push_back({ids[i], keys[i].to_string(), outs[i][0]});
  }
  s.guarded([&] { s.engine->pull(items, priority); });
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (std::size_t j = 1; j < outs[i].size(); ++j) {
      if (outs[i][j].data != outs[i][0].data && outs[i][j].num_bytes() > 0) {
        std::memcpy(outs[i][j].data, outs[i][0].data, outs[i][0].num_bytes());
      }
    }
  }
}

void KVStore::pushpull(const Key& key, const std::vector<TensorView>& values,
                       const std::vector<TensorView>& outs, int priority) {
  std::vector<std::vector<TensorView>> all_outs;
  if (!outs.empty()) all_outs.push_back(outs);
  pushpull(std::vector<Key>{key}, {values}, all_outs, priority);
}

// The engine writes each key's result over the merged value: the caller's
// single value itself when it is also the output, else a buffer of the
// store's, copied out to the outputs (or, without outputs, to every value).
void KVStore::pushpull(const std::vector<Key>& keys,
                       const std::vector<std::vector<TensorView>>& values,
                       const std::vector<std::vector<TensorView>>& outs, int priority) {
  Impl& s = *impl_;
  if (s.compression.type != CompressionType::kNone) {
    s.fail(
        fmt::format("pushpull is not supported with gradient compression ({}), as upstream: "
                    "use push then pull",
                    to_string(s.compression.type)));
  }
  if (keys.size() != values.size() || (!outs.empty() && outs.size() != keys.size())) {
    s.fail(fmt::format("pushpull: {} keys, {} value lists, {} output lists", keys.size(),
                       values.size(), outs.size()));
  }
  const std::vector<int64_t> ids = s.ids_of(keys, "pushpull");
  for (std::size_t i = 0; i < keys.size(); ++i) {
    s.check_values("pushpull", keys[i], ids[i], values[i], "value");
    if (!outs.empty()) {
      std::vector<TensorView> same_as_value = outs[i];
      same_as_value.insert(same_as_value.begin(), values[i][0]);
      s.check_values("pushpull", keys[i], ids[i], same_as_value, "output");
    }
  }
  std::vector<detail::KeyItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const bool in_place = outs.empty() && values[i].size() == 1;
    items.push_back({ids[i], keys[i].to_string(), s.merge(ids[i], values[i], !in_place)});
  }
  s.guarded([&] { s.engine->pushpull(items, priority); });
  if (!s.keeps_values) s.register_keys(keys, ids, {});
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const std::vector<TensorView>& targets = outs.empty() ? values[i] : outs[i];
    for (const TensorView& target : targets) {
      if (target.data != items[i].value.data && target.num_bytes() > 0) {
        std::memcpy(target.data, items[i].value.data, target.num_bytes());
      }
    }
  }
}

void KVStore::broadcast(const Key& key, TensorView value, const std::vector<TensorView>& outs,
                        int priority) {
  broadcast(std::vector<Key>{key}, {value}, {outs}, priority);
}

// init then pull; on horovod, herd's broadcast of a copy of the value.
void KVStore::broadcast(const std::vector<Key>& keys, const std::vector<TensorView>& values,
                        const std::vector<std::vector<TensorView>>& outs, int priority) {
  Impl& s = *impl_;
  if (keys.size() != values.size() || keys.size() != outs.size()) {
    s.fail(fmt::format("broadcast: {} keys, {} values, {} output lists", keys.size(), values.size(),
                       outs.size()));
  }
  if (s.keeps_values) {
    init(keys, values);
    std::vector<Key> pulled_keys;
    std::vector<std::vector<TensorView>> pulled_outs;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (outs[i].empty()) continue;
      pulled_keys.push_back(keys[i]);
      pulled_outs.push_back(outs[i]);
    }
    if (!pulled_keys.empty()) pull(pulled_keys, pulled_outs, priority);
    return;
  }
  const std::vector<int64_t> ids = s.ids_of(keys, "broadcast");
  std::vector<detail::KeyItem> items;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    std::vector<TensorView> all = outs[i];
    all.insert(all.begin(), values[i]);
    s.check_values("broadcast", keys[i], ids[i], all, "value or output");
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    items.push_back({ids[i], keys[i].to_string(), s.merge(ids[i], {values[i]}, true)});
  }
  s.guarded([&] { s.engine->init(items); });
  s.register_keys(keys, ids, {});
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (const TensorView& out : outs[i]) {
      if (out.num_bytes() > 0) std::memcpy(out.data, items[i].value.data, out.num_bytes());
    }
  }
}

void KVStore::set_optimizer(const OptimizerConfig& config) {
  impl_->guarded([&] { impl_->engine->set_optimizer(config); });
}

// The engines call the updater with the key's id; the user's updater gets
// the key as it was given (a string key by its name).
void KVStore::set_updater(Updater updater) {
  Impl* s = impl_.get();
  Updater by_user_key;
  if (updater) {
    by_user_key = [s, updater = std::move(updater)](const Key& key, const TensorView& merged,
                                                    TensorView stored) {
      updater(s->user_key(key.int_key()), merged, stored);
    };
  }
  s->guarded([&] { s->engine->set_updater(std::move(by_user_key)); });
}

// As upstream: only types that merge on devices or across workers compress.
void KVStore::set_gradient_compression(const GradientCompression& compression) {
  Impl& s = *impl_;
  if (!s.device_merge && !contains(s.type, "dist") && s.keeps_values) {
    s.fail(
        fmt::format("gradient compression ({}) needs a device or dist type, as upstream; "
                    "'{}' sums in place uncompressed",
                    compression.type, s.type));
  }
  CompressionParams params;
  s.guarded([&] {
    params = parse_compression(compression.type, compression.threshold);
    s.engine->set_gradient_compression(compression);
  });
  s.compression = params;
  s.device_residuals.clear();
}

bool KVStore::is_capable(const std::string& capability) const {
  return impl_->engine->is_capable(capability);
}

void KVStore::barrier() {
  impl_->guarded([&] { impl_->engine->barrier(); });
}

void KVStore::save_optimizer_states(const std::string& path, bool dump_optimizer) const {
  impl_->guarded([&] { impl_->engine->save_optimizer_states(path, dump_optimizer); });
}

void KVStore::load_optimizer_states(const std::string& path) {
  impl_->guarded([&] { impl_->engine->load_optimizer_states(path); });
}

Stats KVStore::stats() const { return impl_->engine->stats(); }

std::vector<int64_t> KVStore::update_counts() {
  std::vector<int64_t> counts;
  impl_->guarded([&] { counts = impl_->engine->update_counts(); });
  return counts;
}

namespace {

constexpr const char* kTypeList = "local, device, dist_sync, dist_device_sync, dist_async, horovod";

// Stores whose collectives need names agreed between workers are numbered in
// creation order, which is the same on every worker.
std::atomic<int> next_store_number{0};

void require_herd(const std::string& type) {
  if (!herd::is_initialized()) {
    throw Error(fmt::format("kvstore '{}': a distributed store needs herd::init() first", type));
  }
}

}  // namespace

std::unique_ptr<KVStore> create(const std::string& type) {
  std::string name = type;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  auto impl = std::make_unique<KVStore::Impl>();
  impl->type = name;
  impl->device_merge = contains(name, "device");
  if (contains(name, "dist")) {
    require_herd(name);
    impl->engine = contains(name, "_async")
                       ? make_dist_async_engine(name)
                       : detail::make_dist_sync_engine(name, next_store_number++);
  } else if (contains(name, "horovod")) {
    require_herd(name);
    impl->keeps_values = false;
    impl->engine = detail::make_horovod_engine(next_store_number++);
  } else if (contains(name, "local") || impl->device_merge) {
    impl->engine = detail::make_local_engine(name);
  } else {
    throw Error(
        fmt::format("kvstore: unknown type '{}'; the types are {} (a name containing "
                    "\"dist\" is distributed, synchronous unless it contains \"_async\")",
                    type, kTypeList));
  }
  return std::make_unique<KVStore>(std::move(impl));
}

}  // namespace kv
}  // namespace herd
