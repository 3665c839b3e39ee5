// herd::broadcast_parameters and herd::broadcast_optimizer_state
// (include/herd/train/distributed_optimizer.h): a fingerprint of the names and
// sizes is checked first, so ranks that disagree all throw instead of waiting
// for tensors the others never submit; then every buffer is broadcast at once
// and waited for.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "herd/error.h"
#include "herd/herd.h"
#include "herd/train/distributed_optimizer.h"

namespace herd {
namespace {

// FNV-1a over "name\0size\0" for each entry, in order.
int64_t fingerprint(const std::vector<std::pair<std::string, int64_t>>& entries) {
  uint64_t h = 1469598103934665603ull;
  auto add = [&h](const void* data, std::size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
      h ^= bytes[i];
      h *= 1099511628211ull;
    }
  };
  for (const auto& [name, size] : entries) {
    add(name.data(), name.size() + 1);  // with the terminating '\0'
    add(&size, sizeof size);
  }
  return static_cast<int64_t>(h);
}

// Every rank learns whether all agree with `root`'s entries; throws on every
// rank if one does not.
void check_same_as_root(const char* what, const char* entry_kind,
                        const std::vector<std::pair<std::string, int64_t>>& entries, int root,
                        const ProcessSet& process_set) {
  const int64_t mine = fingerprint(entries);
  int64_t roots = mine;
  broadcast(std::string(what) + "/fingerprint", TensorView{&roots, DataType::kInt64, {1}}, root,
            process_set);
  int32_t differs = roots != mine ? 1 : 0;
  int32_t any = 0;
  allreduce(std::string(what) + "/differs", TensorView{&differs, DataType::kInt32, {1}},
            TensorView{&any, DataType::kInt32, {1}}, ReduceOp::kMax, 1.0, 1.0, process_set);
  if (any != 0) {
    throw Error(fmt::format(
        "{}: the ranks do not all hold the same {} names and sizes as root rank {} ({} {} here{})",
        what, entry_kind, root, entries.size(), entries.size() == 1 ? "entry" : "entries",
        differs ? ", which differ from the root's" : ", as the root's"));
  }
}

void broadcast_all(const char* what, const std::vector<std::pair<std::string, TensorView>>& views,
                   int root, const ProcessSet& process_set) {
  std::vector<Handle> handles;
  handles.reserve(views.size());
  std::string first_error;
  for (const auto& [name, view] : views) {
    try {
      handles.push_back(broadcast_async(std::string(what) + "/" + name, view, root, process_set));
    } catch (const Error& e) {
      first_error = fmt::format("{}: broadcast of '{}': {}", what, name, e.what());
      break;
    }
  }
  for (std::size_t i = 0; i < handles.size(); ++i) {
    try {
      wait(handles[i]);
    } catch (const Error& e) {
      if (first_error.empty()) {
        first_error =
            fmt::format("{}: broadcast of '{}' failed: {}", what, views[i].first, e.what());
      }
    }
  }
  if (!first_error.empty()) throw Error(first_error);
}

}  // namespace

void broadcast_parameters(const std::vector<Parameter>& params, int root,
                          const ProcessSet& process_set) {
  std::vector<std::pair<std::string, int64_t>> entries;
  std::vector<std::pair<std::string, TensorView>> views;
  for (const Parameter& p : params) {
    entries.emplace_back(p.name(), p.size());
    views.emplace_back(p.name(), p.value_view());
  }
  check_same_as_root("broadcast_parameters", "parameter", entries, root, process_set);
  broadcast_all("broadcast_parameters", views, root, process_set);
}

void broadcast_optimizer_state(Optimizer& optimizer, const std::vector<Parameter>& params, int root,
                               const ProcessSet& process_set) {
  optimizer.init_state(params);
  OptimizerState state = optimizer.export_state();
  std::vector<std::pair<std::string, int64_t>> entries;
  std::vector<std::pair<std::string, TensorView>> views;
  for (StateBuffer& buffer : state.buffers) {
    const auto n = static_cast<int64_t>(buffer.values.size());
    entries.emplace_back(buffer.name, n);
    views.emplace_back(buffer.name, TensorView{buffer.values.data(), DataType::kFloat32, {n}});
  }
  int64_t step = state.step;
  views.emplace_back("step", TensorView{&step, DataType::kInt64, {1}});
  check_same_as_root("broadcast_optimizer_state", "state buffer", entries, root, process_set);
  broadcast_all("broadcast_optimizer_state", views, root, process_set);
  state.step = step;
  optimizer.import_state(state);
}

}  // namespace herd
