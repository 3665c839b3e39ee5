#include "herd_train/gradient_exchange.h"

#include <algorithm>
#include <cstdio>
#include <type_traits>
#include <utility>
#include <variant>

#include "herd/error.h"
#include "herd/herd.h"
#include "herd/kvstore.h"
#include "herd/train/distributed_optimizer.h"

namespace herd_train {
namespace {

// Checkpoint metadata naming where the optimizer state is: in the file (the
// allreduce engine's optimizer) or in the KVStore's states file beside it.
constexpr const char* kStateKey = "optimizer_state";
constexpr const char* kStateInFile = "herd-train";
constexpr const char* kStateInStore = "kvstore";

// The KVStore's optimizer states beside checkpoint `path` at global `step`:
// one file per commit, named in the checkpoint's metadata, so that the
// checkpoint (renamed into place last) always names states of its own step,
// also when commits come more often than once an epoch.
constexpr const char* kStatesFileKey = "kvstore_states";
// The metadata holds the file's name; it lies in the checkpoint's directory.
std::string store_states_path(const std::string& path, int64_t step) {
  return path + ".kvstore-step" + std::to_string(step);
}
std::string base_name(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string beside(const std::string& path, const std::string& name) {
  const std::size_t slash = path.rfind('/');
  return slash == std::string::npos ? name : path.substr(0, slash + 1) + name;
}

std::unique_ptr<herd::Optimizer> make_optimizer(const TrainOptions& o) {
  if (o.optimizer == "adam") {
    herd::AdamOptions adam;
    adam.lr = o.learning_rate;
    adam.weight_decay = o.weight_decay;
    return std::make_unique<herd::Adam>(adam);
  }
  herd::SGDOptions sgd;
  sgd.lr = o.learning_rate;
  sgd.momentum = o.momentum;
  sgd.weight_decay = o.weight_decay;
  return std::make_unique<herd::SGD>(sgd);
}

// Refuses a checkpoint whose optimizer state is kept where this engine does
// not look for it (a horovod checkpoint resumed by a KVStore, or back).
void check_state_place(const herd::Checkpoint& checkpoint, const std::string& path,
                       const char* expected, const std::string& kvstore) {
  auto found = checkpoint.metadata.find(kStateKey);
  const std::string place = found == checkpoint.metadata.end() ? kStateInFile : found->second;
  if (place != expected) {
    auto type = checkpoint.metadata.find("kvstore");
    const std::string written =
        type == checkpoint.metadata.end() ? std::string("horovod") : type->second;
    throw herd::Error("checkpoint " + path + " was written with --kvstore " + written +
                      ", whose optimizer state this run's --kvstore " + kvstore +
                      " cannot take over: resume with --kvstore " + written);
  }
}

class AllreduceExchange : public GradientExchange {
 public:
  AllreduceExchange(const TrainOptions& o, const std::vector<herd::Parameter>& params,
                    const herd::Checkpoint* resume, const std::string& resume_path)
      : params_(params),
        inner_(make_optimizer(o)),
        schedule_(make_epoch_schedule(o, herd::size())) {
    if (resume != nullptr) {
      check_state_place(*resume, resume_path, kStateInFile, o.kvstore);
      herd::apply_checkpoint(*resume, params, *inner_);
    }
    herd::DistributedOptimizerOptions options;
    options.backward_passes_per_step = o.gradient_accumulation;
    options.name_prefix = "herd_train";
    opt_ = std::make_unique<herd::DistributedOptimizer>(*inner_, params, options);
    herd::broadcast_parameters(params, 0);
    herd::broadcast_optimizer_state(*inner_, params, 0);
  }

  void grad_ready(const std::vector<herd::Parameter>& layer) override {
    for (const herd::Parameter& p : layer) opt_->grad_ready(p);
  }

  bool step(double position) override {
    inner_->set_learning_rate(herd::learning_rate_at(schedule_, position));
    return opt_->step();
  }

  void refresh_parameters() override {}

  void save_checkpoint(const std::string& path, int64_t step, int64_t epoch, uint64_t seed,
                       const std::map<std::string, std::string>& metadata) override {
    herd::Checkpoint checkpoint = herd::make_checkpoint(params_, *inner_, step, epoch, seed);
    checkpoint.metadata = metadata;
    checkpoint.metadata[kStateKey] = kStateInFile;
    herd::save_checkpoint(path, checkpoint);
  }

 private:
  std::vector<herd::Parameter> params_;
  std::unique_ptr<herd::Optimizer> inner_;
  herd::LrSchedule schedule_;
  std::unique_ptr<herd::DistributedOptimizer> opt_;
};

class StoreExchange : public GradientExchange {
 public:
  StoreExchange(const TrainOptions& o, const std::vector<herd::Parameter>& params,
                int64_t updates_per_epoch, const herd::Checkpoint* resume,
                const std::string& resume_path)
      : options_(o), params_(params), store_(herd::kv::create(o.kvstore)) {
    const bool async = o.engine == Engine::kParameterServer;
    const int workers = store_->num_workers();
    // An optimizer of the run's kind that never steps: its zeroed state
    // fills the checkpoint's optimizer section, whose kind apply_checkpoint
    // checks. The store keeps the real state.
    placeholder_ = make_optimizer(o);
    placeholder_->init_state(params_);
    if (resume != nullptr) {
      check_state_place(*resume, resume_path, kStateInStore, o.kvstore);
      herd::apply_checkpoint(*resume, params_, *placeholder_);
    }

    herd::kv::OptimizerConfig config;
    if (o.optimizer == "adam") {
      config.kind = herd::kv::OptimizerConfig::Kind::kAdam;
      config.adam.lr = o.learning_rate;
      config.adam.weight_decay = o.weight_decay;
    } else {
      config.kind = herd::kv::OptimizerConfig::Kind::kSGD;
      config.sgd.lr = o.learning_rate;
      config.sgd.momentum = o.momentum;
      config.sgd.weight_decay = o.weight_decay;
    }
    // One update: the mean over the workers' pushes (synchronous), or one
    // worker's push (asynchronous), each the sum of k passes' mean gradients.
    const int summed_workers = async ? 1 : workers;
    config.rescale_grad = 1.0 / (static_cast<double>(summed_workers) * o.gradient_accumulation);
    // The store counts its updates from 0 (on a server, every worker's
    // pushes): the epoch schedule of `summed_workers` ranks, stretched over
    // the updates of an epoch.
    const double updates = static_cast<double>(updates_per_epoch) * (async ? workers : 1);
    config.schedule = stretch_schedule(make_epoch_schedule(o, summed_workers), updates);

    for (const herd::Parameter& p : params_) {
      keys_.emplace_back(p.name());
      grads_.push_back({p.grad_view()});
      values_.push_back({p.value_view()});
    }
    if (o.gradient_compression != "none") {
      herd::kv::GradientCompression compression;
      compression.type = o.gradient_compression;
      compression.threshold = o.compression_threshold;
      store_->set_gradient_compression(compression);
    }
    // Rank 0's values (the same model on every rank, or the checkpoint's)
    // become the store's; every worker pulls them back.
    std::vector<herd::TensorView> initial;
    for (const herd::Parameter& p : params_) initial.push_back(p.value_view());
    store_->init(keys_, initial);
    store_->set_optimizer(config);
    if (resume != nullptr) {
      auto states = resume->metadata.find(kStatesFileKey);
      if (states == resume->metadata.end()) {
        throw herd::Error("checkpoint " + resume_path + " names no KVStore states file (" +
                          kStatesFileKey + " in its metadata)");
      }
      states_file_ = beside(resume_path, states->second);
      store_->load_optimizer_states(states_file_);
    }
    store_->pull(keys_, values_);
  }

  void grad_ready(const std::vector<herd::Parameter>&) override {}

  bool step(double) override {
    if (++pass_ < options_.gradient_accumulation) return false;
    pass_ = 0;
    store_->push(keys_, grads_);
    store_->pull(keys_, values_);
    return true;
  }

  void refresh_parameters() override {
    if (options_.engine != Engine::kParameterServer) return;
    // Every worker's last push is in before anyone reads the servers, so
    // every worker evaluates the same parameters.
    store_->barrier();
    store_->pull(keys_, values_);
  }

  void save_checkpoint(const std::string& path, int64_t step, int64_t epoch, uint64_t seed,
                       const std::map<std::string, std::string>& metadata) override {
    // The states first, then the checkpoint naming them; the previous
    // commit's states go once no checkpoint names them.
    const std::string states = store_states_path(path, step);
    store_->save_optimizer_states(states, /*dump_optimizer=*/false);
    herd::Checkpoint checkpoint = herd::make_checkpoint(params_, *placeholder_, step, epoch, seed);
    checkpoint.metadata = metadata;
    checkpoint.metadata[kStateKey] = kStateInStore;
    checkpoint.metadata[kStatesFileKey] = base_name(states);
    checkpoint.metadata["kvstore"] = options_.kvstore;
    herd::save_checkpoint(path, checkpoint);
    if (!states_file_.empty() && states_file_ != states) std::remove(states_file_.c_str());
    states_file_ = states;
  }

 private:
  const TrainOptions& options_;
  std::vector<herd::Parameter> params_;
  std::unique_ptr<herd::kv::KVStore> store_;
  std::unique_ptr<herd::Optimizer> placeholder_;
  std::vector<herd::kv::Key> keys_;
  std::vector<std::vector<herd::TensorView>> grads_, values_;
  std::string states_file_;  // the states the latest checkpoint names (rank 0)
  int pass_ = 0;
};

}  // namespace

herd::LrSchedule make_epoch_schedule(const TrainOptions& o, int ranks) {
  const double base =
      o.scale_lr ? herd::scaled_learning_rate(o.learning_rate, ranks) : o.learning_rate;
  herd::LinearWarmup warmup;
  if (o.warmup_epochs > 0) {
    warmup = o.scale_lr ? herd::large_batch_warmup(ranks, o.warmup_epochs)
                        : herd::LinearWarmup{o.warmup_epochs, 0.0};
  }
  if (o.lr_schedule == "cosine") {
    herd::CosineDecay cosine;
    cosine.base_lr = base;
    cosine.total = std::max<double>(o.epochs, o.warmup_epochs + 1e-9);
    cosine.warmup = warmup;
    return cosine;
  }
  if (o.lr_schedule == "step") {
    herd::StepDecay step;
    step.base_lr = base;
    step.step_size = o.lr_step_epochs;
    step.gamma = o.lr_step_gamma;
    step.warmup = warmup;
    return step;
  }
  herd::ConstantLr constant;
  constant.base_lr = base;
  constant.warmup = warmup;
  return constant;
}

herd::LrSchedule stretch_schedule(const herd::LrSchedule& schedule, double units_per_epoch) {
  return std::visit(
      [units_per_epoch](auto stretched) -> herd::LrSchedule {
        using T = std::decay_t<decltype(stretched)>;
        stretched.warmup.duration *= units_per_epoch;
        if constexpr (std::is_same_v<T, herd::StepDecay>) stretched.step_size *= units_per_epoch;
        if constexpr (std::is_same_v<T, herd::MultiStepDecay>) {
          for (double& m : stretched.milestones) m *= units_per_epoch;
        }
        if constexpr (std::is_same_v<T, herd::CosineDecay> ||
                      std::is_same_v<T, herd::PolynomialDecay>) {
          stretched.total *= units_per_epoch;
        }
        return stretched;
      },
      schedule);
}

std::unique_ptr<GradientExchange> make_gradient_exchange(const TrainOptions& options,
                                                         const std::vector<herd::Parameter>& params,
                                                         int64_t updates_per_epoch,
                                                         const herd::Checkpoint* resume,
                                                         const std::string& resume_path) {
  if (options.engine == Engine::kAllreduce) {
    return std::make_unique<AllreduceExchange>(options, params, resume, resume_path);
  }
  return std::make_unique<StoreExchange>(options, params, updates_per_epoch, resume, resume_path);
}

}  // namespace herd_train
