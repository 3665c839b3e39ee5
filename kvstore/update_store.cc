// The store's values and their update rule (kvstore/update_store.h).
#include "kvstore/update_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>

#include "herd/error.h"
#include "herd/train/checkpoint.h"
#include "kvstore/optimizer_config_codec.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

// Metadata of an optimizer-state file, to tell it from a training checkpoint
// and from a future layout.
constexpr const char* kFormatField = "kvstore.format";
constexpr const char* kFormatName = "herd-kvstore-optimizer-states";
constexpr const char* kVersionField = "kvstore.version";
constexpr const char* kVersion = "1";
constexpr const char* kKindField = "kvstore.optimizer";
constexpr const char* kConfigPrefix = "kvstore.config.";
constexpr const char* kKeysField = "kvstore.keys";

std::string key_field(int64_t id, const char* what) {
  return fmt::format("kvstore.key.{}.{}", id, what);
}

// The optimizer's parameter name of a key: its state buffers are "<id>/<slot>".
std::string param_name(int64_t id) { return std::to_string(id); }

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config) {
  switch (config.kind) {
    case OptimizerConfig::Kind::kSGD: return std::make_unique<SGD>(config.sgd);
    case OptimizerConfig::Kind::kAdam: return std::make_unique<Adam>(config.adam);
    case OptimizerConfig::Kind::kAdamW: {
      AdamOptions options = config.adam;
      options.decoupled_weight_decay = true;
      return std::make_unique<Adam>(options);
    }
  }
  throw Error("kvstore: unknown optimizer kind");
}

// Throws when the config cannot run: bad options (the optimizer's own
// checks), a bad schedule, a rescale_grad that is not finite.
void check_config(const OptimizerConfig& config) {
  make_optimizer(config);
  if (config.schedule) learning_rate_at(*config.schedule, 0.0);
  if (!std::isfinite(config.rescale_grad)) {
    throw Error(
        fmt::format("kvstore: optimizer rescale_grad {} is not finite", config.rescale_grad));
  }
}

// An integer field of the file's metadata, at least `min`.
int64_t parse_integer(const std::map<std::string, std::string>& metadata, const std::string& field,
                      const std::string& path, int64_t min = 0) {
  auto it = metadata.find(field);
  if (it == metadata.end()) {
    throw Error(fmt::format("kvstore: optimizer states '{}': field '{}' is missing", path, field));
  }
  try {
    std::size_t used = 0;
    const long long value = std::stoll(it->second, &used);
    if (used == it->second.size() && value >= min) return value;
  } catch (const std::exception&) {
  }
  throw Error(
      fmt::format("kvstore: optimizer states '{}': field '{}' is '{}', not an integer >= {}", path,
                  field, it->second, min));
}

}  // namespace

struct UpdateStore::Impl {
  struct KeyState {
    std::string name;  // for messages
    Tensor value;
    int64_t updates = 0;
    std::unique_ptr<Optimizer> optimizer;  // made at the key's first optimizer update
    std::vector<float> scratch;            // the rescaled gradient the optimizer reads
  };

  std::map<int64_t, KeyState> keys;
  std::optional<OptimizerConfig> config;
  Updater updater;
  std::vector<Key> keys_by_id;
  int64_t update_count = 0;  // the largest per-key count (MXNet's num_update)

  KeyState& key(int64_t id, const char* what) {
    auto it = keys.find(id);
    if (it == keys.end()) {
      throw Error(fmt::format("kvstore: {} of key {}, which was never initialised", what, id));
    }
    return it->second;
  }
  const KeyState& key(int64_t id, const char* what) const {
    return const_cast<Impl*>(this)->key(id, what);
  }

  Key user_key(int64_t id) const {
    if (id >= 0 && static_cast<std::size_t>(id) < keys_by_id.size()) return keys_by_id[id];
    return Key(id);
  }

  void apply_optimizer(int64_t id, KeyState& state, const TensorView& merged);
  OptimizerConfig config_for(const Checkpoint& checkpoint, const std::string& path) const;
};

// The learning rate is the schedule's at MXNet's num_update - 1: the key's
// count is raised first and num_update is the largest count, so every key of
// step s (0-based, all keys pushed once per step) sees t = s.
void UpdateStore::Impl::apply_optimizer(int64_t id, KeyState& state, const TensorView& merged) {
  if (merged.dtype != DataType::kFloat32) {
    throw Error(fmt::format(
        "kvstore: key {} holds {} values; the store's optimizer ({}) updates float32 only",
        state.name, herd::to_string(merged.dtype), to_string(config->kind)));
  }
  const int64_t n = state.value.num_elements();
  if (!state.optimizer) state.optimizer = make_optimizer(*config);
  if (config->schedule) {
    const int64_t t = std::max(update_count, state.updates + 1) - 1;
    state.optimizer->set_learning_rate(learning_rate_at(*config->schedule, static_cast<double>(t)));
  }
  // The optimizer may write into its gradient (weight decay), and the merged
  // buffer is the caller's: work on a copy.
  state.scratch.resize(static_cast<std::size_t>(n));
  const auto* grad = static_cast<const float*>(merged.data);
  const auto rescale = static_cast<float>(config->rescale_grad);
  for (int64_t i = 0; i < n; ++i) state.scratch[i] = grad[i] * rescale;
  state.optimizer->step(
      {Parameter(param_name(id), state.value.data_as<float>(), state.scratch.data(), n)});
}

UpdateStore::UpdateStore() : impl_(std::make_unique<Impl>()) {}
UpdateStore::~UpdateStore() = default;

bool UpdateStore::contains(int64_t id) const { return impl_->keys.count(id) != 0; }

void UpdateStore::init(int64_t id, const std::string& name, const TensorView& value) {
  if (contains(id)) {
    throw Error(fmt::format("kvstore: key {} is initialised twice", name));
  }
  if (value.device.type != DeviceType::kCPU) {
    throw Error(fmt::format("kvstore: key {}: the store keeps host values; got a view on {}", name,
                            herd::to_string(value.device)));
  }
  Impl::KeyState state;
  state.name = name;
  state.value.reset(value.dtype, value.shape);
  if (value.num_bytes() > 0) std::memcpy(state.value.data(), value.data, value.num_bytes());
  impl_->keys.emplace(id, std::move(state));
}

void UpdateStore::update(int64_t id, const TensorView& merged) {
  Impl::KeyState& state = impl_->key(id, "update");
  if (merged.dtype != state.value.dtype() || merged.num_elements() != state.value.num_elements()) {
    throw Error(fmt::format("kvstore: key {} holds {} {}; the update is {} {}", state.name,
                            herd::to_string(state.value.dtype()),
                            shape_to_string(state.value.shape()), herd::to_string(merged.dtype),
                            shape_to_string(merged.shape)));
  }
  if (impl_->updater) {
    impl_->updater(impl_->user_key(id), merged, state.value.view());
  } else if (impl_->config) {
    impl_->apply_optimizer(id, state, merged);
  } else if (merged.data != state.value.data() && merged.num_bytes() > 0) {
    std::memcpy(state.value.data(), merged.data, merged.num_bytes());
  }
  state.updates += 1;
  impl_->update_count = std::max(impl_->update_count, state.updates);
}

void UpdateStore::read(int64_t id, TensorView out) const {
  const Impl::KeyState& state = impl_->key(id, "read");
  if (out.dtype != state.value.dtype() || out.num_elements() != state.value.num_elements()) {
    throw Error(fmt::format("kvstore: key {} holds {} {}; the output is {} {}", state.name,
                            herd::to_string(state.value.dtype()),
                            shape_to_string(state.value.shape()), herd::to_string(out.dtype),
                            shape_to_string(out.shape)));
  }
  if (out.data != state.value.data() && out.num_bytes() > 0) {
    std::memcpy(out.data, state.value.data(), out.num_bytes());
  }
}

TensorView UpdateStore::value(int64_t id) { return impl_->key(id, "value").value.view(); }

// As upstream, a new optimizer replaces the updater and starts from fresh
// state.
void UpdateStore::set_optimizer(const OptimizerConfig& config) {
  check_config(config);
  impl_->config = config;
  impl_->updater = nullptr;
  for (auto& entry : impl_->keys) entry.second.optimizer.reset();
}

void UpdateStore::set_updater(Updater updater, std::vector<Key> keys_by_id) {
  impl_->updater = std::move(updater);
  impl_->keys_by_id = std::move(keys_by_id);
  impl_->config.reset();
  for (auto& entry : impl_->keys) entry.second.optimizer.reset();
}

bool UpdateStore::has_optimizer() const { return impl_->config.has_value(); }
bool UpdateStore::has_updater() const { return static_cast<bool>(impl_->updater); }
int64_t UpdateStore::update_count() const { return impl_->update_count; }

// The file is a herd checkpoint: no parameters, the keys' optimizer buffers
// ("<id>/<slot>") in OPTS, and in the metadata the format's name, each key's
// optimizer step and update count and size, and with dump_optimizer the
// optimizer's config.
void UpdateStore::save_optimizer_states(const std::string& path, bool dump_optimizer) const {
  if (!impl_->config) {
    throw Error(fmt::format(
        "kvstore: cannot save optimizer states to '{}': the store has no optimizer{}", path,
        impl_->updater ? " (its updater is a user function, which has no saved form)" : ""));
  }
  Checkpoint checkpoint;
  checkpoint.step = impl_->update_count;
  checkpoint.optimizer.step = impl_->update_count;
  checkpoint.metadata[kFormatField] = kFormatName;
  checkpoint.metadata[kVersionField] = kVersion;
  checkpoint.metadata[kKindField] = to_string(impl_->config->kind);
  std::string ids;
  for (const auto& [id, state] : impl_->keys) {
    ids += (ids.empty() ? "" : ",") + std::to_string(id);
    checkpoint.metadata[key_field(id, "name")] = state.name;
    checkpoint.metadata[key_field(id, "updates")] = std::to_string(state.updates);
    checkpoint.metadata[key_field(id, "size")] = std::to_string(state.value.num_elements());
    if (!state.optimizer) continue;
    OptimizerState exported = state.optimizer->export_state();
    checkpoint.metadata[key_field(id, "step")] = std::to_string(exported.step);
    for (StateBuffer& buffer : exported.buffers) {
      checkpoint.optimizer.buffers.push_back(std::move(buffer));
    }
  }
  checkpoint.metadata[kKeysField] = ids;
  if (dump_optimizer) {
    for (auto& [field, value] : encode_optimizer_config(*impl_->config, kConfigPrefix)) {
      checkpoint.metadata[field] = value;
    }
  }
  save_checkpoint(path, checkpoint);
}

namespace {

std::string metadata_field(const Checkpoint& checkpoint, const std::string& name) {
  auto it = checkpoint.metadata.find(name);
  return it == checkpoint.metadata.end() ? std::string("(absent)") : it->second;
}

// Checks that `checkpoint` is an optimizer-state file this build reads.
void check_format(const Checkpoint& checkpoint, const std::string& path) {
  const std::string format = metadata_field(checkpoint, kFormatField);
  if (format != kFormatName) {
    throw Error(fmt::format(
        "kvstore: '{}' is a herd checkpoint but not a KVStore's optimizer states ({} is {}, "
        "expected {})",
        path, kFormatField, format, kFormatName));
  }
  const std::string version = metadata_field(checkpoint, kVersionField);
  if (version != kVersion) {
    throw Error(fmt::format("kvstore: optimizer states '{}' have version {}; this build reads {}",
                            path, version, kVersion));
  }
}

// The ids listed in the file's "kvstore.keys".
std::vector<int64_t> file_keys(const Checkpoint& checkpoint, const std::string& path) {
  std::vector<int64_t> ids;
  const std::string list = metadata_field(checkpoint, kKeysField);
  if (list.empty()) return ids;
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t comma = std::min(list.find(',', start), list.size());
    const std::string one = list.substr(start, comma - start);
    std::map<std::string, std::string> field{{kKeysField, one}};
    ids.push_back(parse_integer(field, kKeysField, path, INT64_MIN));
    start = comma + 1;
  }
  return ids;
}

// The buffers of the key with parameter name `name` ("<name>/<slot>").
std::vector<StateBuffer> buffers_of(const std::vector<StateBuffer>& all, const std::string& name) {
  std::vector<StateBuffer> mine;
  for (const StateBuffer& buffer : all) {
    if (buffer.name.compare(0, name.size() + 1, name + "/") == 0) mine.push_back(buffer);
  }
  return mine;
}

}  // namespace

// The optimizer to use with the file: its own config when saved with
// dump_optimizer, else the store's, which must be of the file's kind.
OptimizerConfig UpdateStore::Impl::config_for(const Checkpoint& checkpoint,
                                              const std::string& path) const {
  std::optional<OptimizerConfig> chosen = config;
  if (checkpoint.metadata.count(std::string(kConfigPrefix) + "kind")) {
    chosen = decode_optimizer_config(checkpoint.metadata, kConfigPrefix);
    check_config(*chosen);
  }
  if (!chosen) {
    throw Error(fmt::format(
        "kvstore: cannot load optimizer states from '{}': the store has no optimizer and the file "
        "holds none (save it with dump_optimizer, or call set_optimizer first)",
        path));
  }
  const std::string file_kind = metadata_field(checkpoint, kKindField);
  if (file_kind != to_string(chosen->kind)) {
    throw Error(
        fmt::format("kvstore: optimizer states '{}' are {} states; the store's optimizer is {}",
                    path, file_kind, to_string(chosen->kind)));
  }
  return *chosen;
}

// Restores every key's optimizer state and update count (and, when the file
// holds one, the optimizer config); all or nothing: the new optimizers are
// built aside and swapped in once every key has been checked. Keys of the
// store absent from the file start from fresh state.
void UpdateStore::load_optimizer_states(const std::string& path) {
  const Checkpoint checkpoint = load_checkpoint(path);
  check_format(checkpoint, path);
  const OptimizerConfig config = impl_->config_for(checkpoint, path);
  const auto& metadata = checkpoint.metadata;
  std::map<int64_t, std::unique_ptr<Optimizer>> optimizers;
  std::map<int64_t, int64_t> updates;
  for (int64_t id : file_keys(checkpoint, path)) {
    auto it = impl_->keys.find(id);
    if (it == impl_->keys.end()) {
      throw Error(fmt::format(
          "kvstore: optimizer states '{}' hold key {}, which this store has not initialised", path,
          metadata_field(checkpoint, key_field(id, "name"))));
    }
    Impl::KeyState& state = it->second;
    const int64_t size = parse_integer(metadata, key_field(id, "size"), path);
    if (size != state.value.num_elements()) {
      throw Error(fmt::format(
          "kvstore: optimizer states '{}': key {} has {} elements in the file, {} in the store",
          path, state.name, size, state.value.num_elements()));
    }
    updates[id] = parse_integer(metadata, key_field(id, "updates"), path);
    if (!metadata.count(key_field(id, "step"))) continue;  // no optimizer update when saved
    auto optimizer = make_optimizer(config);
    std::vector<float> grad(static_cast<std::size_t>(size));
    const Parameter param(param_name(id), state.value.data_as<float>(), grad.data(), size);
    optimizer->init_state({param});
    optimizer->import_state({parse_integer(metadata, key_field(id, "step"), path),
                             buffers_of(checkpoint.optimizer.buffers, param_name(id))});
    optimizers[id] = std::move(optimizer);
  }
  impl_->config = config;
  impl_->updater = nullptr;
  impl_->update_count = 0;
  for (auto& [id, state] : impl_->keys) {
    auto found = optimizers.find(id);
    state.optimizer = found == optimizers.end() ? nullptr : std::move(found->second);
    state.updates = updates.count(id) ? updates[id] : 0;
    impl_->update_count = std::max(impl_->update_count, state.updates);
  }
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
