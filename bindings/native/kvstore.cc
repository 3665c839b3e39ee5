// herd::kv::KVStore for herd.kvstore (bindings/python/herd/kvstore.py).
//
// Values cross as elsewhere in the extension, by address: each is a tuple
// (address, dtype name, shape, device, stream) that the Python layer makes
// from a NumPy array or a torch tensor and keeps alive for the call, which
// returns only once the store is done with it. Keys cross as Python ints or
// strings. Every call that can wait (on other workers, on servers, on the
// store's locks) runs without the GIL; a Python updater takes it back while
// it runs, on whatever thread the store calls it from.
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "herd/kvstore.h"
#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {
namespace {

using ValueTuple =
    std::tuple<std::uintptr_t, std::string, std::vector<int64_t>, int, std::uintptr_t>;
using ValueList = std::vector<ValueTuple>;

TensorView to_view(const ValueTuple& value) {
  const auto& [address, dtype, shape, device, stream] = value;
  return make_view(address, dtype, shape, device, stream);
}

std::vector<TensorView> to_views(const ValueList& values) {
  std::vector<TensorView> views;
  views.reserve(values.size());
  for (const ValueTuple& value : values) views.push_back(to_view(value));
  return views;
}

std::vector<std::vector<TensorView>> to_views(const std::vector<ValueList>& per_key) {
  std::vector<std::vector<TensorView>> views;
  views.reserve(per_key.size());
  for (const ValueList& values : per_key) views.push_back(to_views(values));
  return views;
}

// An int (not a bool) or a str; anything else is a TypeError naming its type.
kv::Key to_key(const py::handle& key) {
  if (py::isinstance<py::str>(key)) return kv::Key(key.cast<std::string>());
  if (py::isinstance<py::int_>(key) && !py::isinstance<py::bool_>(key)) {
    return kv::Key(key.cast<int64_t>());
  }
  throw py::type_error("herd.kvstore: a key is an int or a str, not " +
                       std::string(py::str(py::type::of(key).attr("__name__"))));
}

std::vector<kv::Key> to_keys(const py::list& keys) {
  std::vector<kv::Key> converted;
  converted.reserve(keys.size());
  for (const py::handle& key : keys) converted.push_back(to_key(key));
  return converted;
}

py::object key_object(const kv::Key& key) {
  if (key.is_int()) return py::int_(key.int_key());
  return py::str(key.str_key());
}

// A NumPy array over a view's memory, without a copy, valid while the
// updater runs. The capsule base keeps NumPy from taking ownership.
py::array host_array(const TensorView& view, bool writable) {
  if (view.device.type != DeviceType::kCPU) {
    throw Error("herd.kvstore: a Python updater takes values in host memory; this one is on " +
                to_string(view.device));
  }
  std::vector<py::ssize_t> shape(view.shape.begin(), view.shape.end());
  py::array array(py::dtype(array_typestr(view.dtype)), shape, view.data,
                  py::capsule(view.data, [](void*) {}));
  if (!writable) {
    array.attr("flags").attr("writeable") = false;
  }
  return array;
}

// The Python callable of set_updater, owned by the C++ store. It is copied
// and released by the store without the GIL, so it is held through a
// shared_ptr whose deleter takes the GIL to drop the reference.
class PythonUpdater {
 public:
  explicit PythonUpdater(py::function function)
      : function_(new py::function(std::move(function)), [](py::function* held) {
          py::gil_scoped_acquire gil;
          delete held;
        }) {}

  // Raises the callable's exception into the store as herd::Error with its
  // text; Store::run then raises the original exception to the caller, with a
  // note naming the key, so a bug in the updater reads as itself.
  void operator()(const kv::Key& key, const TensorView& merged, TensorView stored) {
    py::gil_scoped_acquire gil;
    try {
      (*function_)(key_object(key), host_array(merged, false), host_array(stored, true));
    } catch (py::error_already_set& error) {
      const std::string text = error.what();
      const std::string note = "raised by the herd.kvstore updater on key " + key.to_string();
      if (py::hasattr(error.value(), "add_note")) error.value().attr("add_note")(note);
      failure_ = std::make_shared<py::error_already_set>(std::move(error));
      throw Error("herd.kvstore: the updater raised on key " + key.to_string() + ": " + text);
    }
  }

  // The exception the updater raised last, if any, taken (the GIL held).
  std::shared_ptr<py::error_already_set> take_failure() { return std::exchange(failure_, nullptr); }

 private:
  std::shared_ptr<py::function> function_;
  std::shared_ptr<py::error_already_set> failure_;
};

// One store. The C++ store, not Python's garbage collector, decides when its
// updater dies: it is released without the GIL (PythonUpdater's deleter).
class Store {
 public:
  explicit Store(std::unique_ptr<kv::KVStore> store) : store_(std::move(store)) {}
  ~Store() {
    py::gil_scoped_release release;
    store_.reset();
  }
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  kv::KVStore& get() { return *store_; }

  // Runs `call` without the GIL; when it fails because the updater raised,
  // raises the updater's exception instead of the store's herd::Error.
  template <typename Call>
  void run(Call&& call) {
    if (updater_) updater_->take_failure();  // one the store did not report
    try {
      py::gil_scoped_release release;
      call(*store_);
    } catch (const Error&) {
      if (updater_) {
        if (auto failure = updater_->take_failure()) throw std::move(*failure);
      }
      throw;
    }
  }

  // The store's updater becomes the one whose failures run() looks for only
  // once the store has taken it (dist_async refuses any).
  void set_updater(py::function function) {
    auto held = std::make_shared<PythonUpdater>(std::move(function));
    kv::Updater updater = [held](const kv::Key& key, const TensorView& merged, TensorView stored) {
      (*held)(key, merged, stored);
    };
    run([&](kv::KVStore& store) { store.set_updater(std::move(updater)); });
    updater_ = std::move(held);
  }

 private:
  std::unique_ptr<kv::KVStore> store_;
  std::shared_ptr<PythonUpdater> updater_;
};

// --- Optimizer descriptions ------------------------------------------------

template <typename T>
T field(const py::dict& fields, const char* name, T fallback) {
  if (!fields.contains(name)) return fallback;
  return fields[name].cast<T>();
}

LinearWarmup warmup_of(const py::dict& fields) {
  LinearWarmup warmup;
  warmup.duration = field(fields, "warmup_duration", 0.0);
  warmup.start_factor = field(fields, "warmup_start_factor", 0.0);
  return warmup;
}

// A schedule from herd.kvstore's description: its kind ("constant", "step",
// "multi_step", "cosine", "polynomial") and LrSchedule's field names.
LrSchedule schedule_of(const std::string& kind, const py::dict& fields) {
  const double base_lr = field(fields, "base_lr", 0.0);
  if (kind == "constant") return ConstantLr{base_lr, warmup_of(fields)};
  if (kind == "step") {
    return StepDecay{base_lr, field(fields, "step_size", 1.0), field(fields, "gamma", 0.1),
                     warmup_of(fields)};
  }
  if (kind == "multi_step") {
    return MultiStepDecay{base_lr, field(fields, "milestones", std::vector<double>{}),
                          field(fields, "gamma", 0.1), warmup_of(fields)};
  }
  if (kind == "cosine") {
    return CosineDecay{base_lr, field(fields, "total", 1.0), field(fields, "min_lr", 0.0),
                       warmup_of(fields)};
  }
  if (kind == "polynomial") {
    return PolynomialDecay{base_lr, field(fields, "total", 1.0), field(fields, "power", 1.0),
                           field(fields, "end_lr", 0.0), warmup_of(fields)};
  }
  throw py::value_error("herd.kvstore: no learning-rate schedule '" + kind +
                        "'; herd has constant, step, multi_step, cosine and polynomial");
}

kv::OptimizerConfig optimizer_config(const std::string& kind, const py::dict& fields,
                                     const py::object& schedule) {
  kv::OptimizerConfig config;
  config.rescale_grad = field(fields, "rescale_grad", 1.0);
  if (kind == "sgd") {
    config.kind = kv::OptimizerConfig::Kind::kSGD;
    config.sgd.lr = field(fields, "lr", config.sgd.lr);
    config.sgd.momentum = field(fields, "momentum", config.sgd.momentum);
    config.sgd.dampening = field(fields, "dampening", config.sgd.dampening);
    config.sgd.weight_decay = field(fields, "weight_decay", config.sgd.weight_decay);
    config.sgd.nesterov = field(fields, "nesterov", config.sgd.nesterov);
  } else if (kind == "adam" || kind == "adamw") {
    config.kind =
        kind == "adam" ? kv::OptimizerConfig::Kind::kAdam : kv::OptimizerConfig::Kind::kAdamW;
    config.adam.lr = field(fields, "lr", config.adam.lr);
    config.adam.beta1 = field(fields, "beta1", config.adam.beta1);
    config.adam.beta2 = field(fields, "beta2", config.adam.beta2);
    config.adam.eps = field(fields, "eps", config.adam.eps);
    config.adam.weight_decay = field(fields, "weight_decay", config.adam.weight_decay);
    config.adam.decoupled_weight_decay = kind == "adamw";
  } else {
    throw py::value_error("herd.kvstore: no optimizer '" + kind + "'; herd has sgd, adam, adamw");
  }
  if (!schedule.is_none()) {
    auto [schedule_kind, schedule_fields] = schedule.cast<std::pair<std::string, py::dict>>();
    config.schedule = schedule_of(schedule_kind, schedule_fields);
  }
  return config;
}

void bind_stats(py::module_& m) {
  py::class_<kv::Stats>(m, "KVStoreStats", "Byte and call counters of one store in this process.")
      .def_readonly("pushes", &kv::Stats::pushes)
      .def_readonly("pulls", &kv::Stats::pulls)
      .def_readonly("bytes_sent", &kv::Stats::bytes_sent)
      .def_readonly("bytes_received", &kv::Stats::bytes_received)
      .def("__repr__", [](const kv::Stats& stats) {
        return "KVStoreStats(pushes=" + std::to_string(stats.pushes) +
               ", pulls=" + std::to_string(stats.pulls) +
               ", bytes_sent=" + std::to_string(stats.bytes_sent) +
               ", bytes_received=" + std::to_string(stats.bytes_received) + ")";
      });
}

}  // namespace

// Every method takes the keys as a list and, per key, a list of values (one
// per device): herd.kvstore turns MXNet's single-or-list arguments into that
// shape, so the C++ overload taking lists of keys serves every call.
void bind_kvstore(py::module_& m) {
  bind_stats(m);
  py::class_<Store>(m, "KVStore", "herd::kv::KVStore; use it through herd.kvstore.")
      .def_property_readonly("type", [](Store& s) { return s.get().type(); })
      .def_property_readonly("rank", [](Store& s) { return s.get().rank(); })
      .def_property_readonly("num_workers", [](Store& s) { return s.get().num_workers(); })
      .def("init",
           [](Store& s, const py::list& keys, const ValueList& values) {
             const std::vector<kv::Key> converted = to_keys(keys);
             const std::vector<TensorView> views = to_views(values);
             s.run([&](kv::KVStore& store) { store.init(converted, views); });
           })
      .def("push",
           [](Store& s, const py::list& keys, const std::vector<ValueList>& values, int priority) {
             const std::vector<kv::Key> converted = to_keys(keys);
             const auto views = to_views(values);
             s.run([&](kv::KVStore& store) { store.push(converted, views, priority); });
           })
      .def("pull",
           [](Store& s, const py::list& keys, const std::vector<ValueList>& outs, int priority) {
             const std::vector<kv::Key> converted = to_keys(keys);
             const auto views = to_views(outs);
             s.run([&](kv::KVStore& store) { store.pull(converted, views, priority); });
           })
      .def("pushpull",
           [](Store& s, const py::list& keys, const std::vector<ValueList>& values,
              const std::vector<ValueList>& outs, int priority) {
             const std::vector<kv::Key> converted = to_keys(keys);
             const auto value_views = to_views(values);
             const auto out_views = to_views(outs);
             s.run([&](kv::KVStore& store) {
               store.pushpull(converted, value_views, out_views, priority);
             });
           })
      .def("broadcast",
           [](Store& s, const py::list& keys, const ValueList& values,
              const std::vector<ValueList>& outs, int priority) {
             const std::vector<kv::Key> converted = to_keys(keys);
             const std::vector<TensorView> value_views = to_views(values);
             const auto out_views = to_views(outs);
             s.run([&](kv::KVStore& store) {
               store.broadcast(converted, value_views, out_views, priority);
             });
           })
      .def("set_optimizer",
           [](Store& s, const std::string& kind, const py::dict& fields,
              const py::object& schedule) {
             const kv::OptimizerConfig config = optimizer_config(kind, fields, schedule);
             s.run([&](kv::KVStore& store) { store.set_optimizer(config); });
           })
      .def("set_updater", &Store::set_updater)
      .def("set_gradient_compression",
           [](Store& s, const std::string& type, double threshold) {
             kv::GradientCompression compression;
             compression.type = type;
             compression.threshold = threshold;
             s.run([&](kv::KVStore& store) { store.set_gradient_compression(compression); });
           })
      .def("is_capable",
           [](Store& s, const std::string& capability) { return s.get().is_capable(capability); })
      .def("barrier", [](Store& s) { s.run([](kv::KVStore& store) { store.barrier(); }); })
      .def("save_optimizer_states",
           [](Store& s, const std::string& path, bool dump_optimizer) {
             s.run([&](kv::KVStore& store) { store.save_optimizer_states(path, dump_optimizer); });
           })
      .def("load_optimizer_states",
           [](Store& s, const std::string& path) {
             s.run([&](kv::KVStore& store) { store.load_optimizer_states(path); });
           })
      .def("stats", [](Store& s) { return s.get().stats(); })
      .def("update_counts", [](Store& s) {
        std::vector<int64_t> counts;
        s.run([&](kv::KVStore& store) { counts = store.update_counts(); });
        return counts;
      });

  m.def(
      "kvstore_create",
      [](const std::string& type) {
        std::unique_ptr<kv::KVStore> store;
        {
          py::gil_scoped_release release;
          store = kv::create(type);
        }
        return std::make_unique<Store>(std::move(store));
      },
      py::arg("type"), "Makes a store of this type (herd::kv::create).");
}

}  // namespace herd::python
