// herd::DistributedOptimizer (include/herd/train/distributed_optimizer.h): one
// asynchronous allreduce per gradient, started by grad_ready() on the last
// backward pass of a step and waited for by synchronize() / step().
#include <fmt/format.h>

#include <cmath>
#include <exception>

#include "herd/error.h"
#include "herd/float16.h"
#include "herd/herd.h"
#include "herd/train/distributed_optimizer.h"

namespace herd {

struct DistributedOptimizer::Slot {
  std::string name;            // the allreduce's name
  Handle handle;               // valid while the allreduce runs or until waited
  bool started = false;        // in this step
  std::vector<uint16_t> half;  // the float16 copy (kFP16 only)
};

DistributedOptimizer::DistributedOptimizer(Optimizer& optimizer, std::vector<Parameter> params,
                                           DistributedOptimizerOptions options)
    : optimizer_(optimizer), params_(std::move(params)), options_(std::move(options)) {
  if (options_.op != ReduceOp::kAverage && options_.op != ReduceOp::kSum) {
    throw Error(fmt::format("DistributedOptimizer: op {} is not supported; use average or sum",
                            to_string(options_.op)));
  }
  if (options_.backward_passes_per_step < 1) {
    throw Error(fmt::format("DistributedOptimizer: backward_passes_per_step {} must be >= 1",
                            options_.backward_passes_per_step));
  }
  const double f = options_.gradient_predivide_factor;
  if (!std::isfinite(f) || f <= 0) {
    throw Error(fmt::format(
        "DistributedOptimizer: gradient_predivide_factor {} must be finite and > 0", f));
  }
  if (f != 1.0 && options_.op != ReduceOp::kAverage) {
    throw Error(fmt::format(
        "DistributedOptimizer: gradient_predivide_factor {} needs op average (op is {})", f,
        to_string(options_.op)));
  }
  slots_.resize(params_.size());
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = params_[i];
    if (!index_by_name_.emplace(p.name(), i).second) {
      throw Error(fmt::format("DistributedOptimizer: parameter '{}' is given twice", p.name()));
    }
    slots_[i].name = options_.name_prefix + "/" + p.name();
    if (options_.compression == Compression::kFP16) {
      slots_[i].half.assign(static_cast<std::size_t>(p.size()), 0);
    }
  }
}

DistributedOptimizer::~DistributedOptimizer() {
  std::lock_guard<std::mutex> lock(mutex_);
  wait_all(/*rethrow=*/false);
}

std::size_t DistributedOptimizer::index_of(const std::string& name) const {
  const auto found = index_by_name_.find(name);
  if (found != index_by_name_.end()) return found->second;
  throw Error(fmt::format(
      "DistributedOptimizer: grad_ready for parameter '{}', which is not one of its {} parameters",
      name, params_.size()));
}

bool DistributedOptimizer::is_final_pass() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pass_ == options_.backward_passes_per_step - 1;
}

int DistributedOptimizer::pass() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return pass_;
}

void DistributedOptimizer::grad_ready(const Parameter& param) { grad_ready(param.name()); }

void DistributedOptimizer::grad_ready(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::size_t i = index_of(name);
  if (pass_ < options_.backward_passes_per_step - 1) return;  // accumulating
  if (synchronized_) {
    throw Error(fmt::format(
        "DistributedOptimizer: grad_ready for parameter '{}' after synchronize() in the same step",
        name));
  }
  if (slots_[i].started) {
    throw Error(fmt::format(
        "DistributedOptimizer: the gradient of parameter '{}' was already reported ready in this "
        "step",
        name));
  }
  start(i);
}

void DistributedOptimizer::start(std::size_t i) {
  const Parameter& p = params_[i];
  Slot& slot = slots_[i];
  const double k = options_.backward_passes_per_step;
  double prescale = 1.0 / k, postscale = 1.0;
  if (options_.op == ReduceOp::kAverage) {
    prescale = 1.0 / (k * options_.gradient_predivide_factor);
    postscale = options_.gradient_predivide_factor;
  }
  TensorView view = p.grad_view();
  if (options_.compression == Compression::kFP16) {
    float_to_float16(p.grad(), slot.half.data(), p.size());
    view = TensorView{slot.half.data(), DataType::kFloat16, {p.size()}};
  }
  try {
    slot.handle = allreduce_async(slot.name, view, view, options_.op, prescale, postscale,
                                  options_.process_set);
  } catch (const Error& e) {
    throw Error(fmt::format("DistributedOptimizer: allreduce of the gradient of parameter '{}': {}",
                            p.name(), e.what()));
  }
  slot.started = true;
}

void DistributedOptimizer::wait_all(bool rethrow) {
  std::string first_error;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    if (!slot.handle.valid()) continue;
    try {
      wait(slot.handle);
      if (rethrow && options_.compression == Compression::kFP16) {
        float16_to_float(slot.half.data(), params_[i].grad(), params_[i].size());
      }
    } catch (const std::exception& e) {
      if (first_error.empty()) {
        first_error = fmt::format(
            "DistributedOptimizer: allreduce of the gradient of parameter '{}' failed: {}",
            params_[i].name(), e.what());
      }
    }
    slot.handle = Handle();
  }
  if (rethrow && !first_error.empty()) throw Error(first_error);
}

void DistributedOptimizer::reset_step() {
  for (Slot& slot : slots_) {
    slot.started = false;
    slot.handle = Handle();
  }
  synchronized_ = false;
  pass_ = 0;
}

void DistributedOptimizer::synchronize_locked() {
  if (synchronized_) return;
  std::string start_error;
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].started) continue;
    try {
      start(i);
    } catch (const Error& e) {
      if (start_error.empty()) start_error = e.what();
    }
  }
  try {
    wait_all(/*rethrow=*/true);
  } catch (...) {
    reset_step();
    throw;
  }
  if (!start_error.empty()) {
    reset_step();
    throw Error(start_error);
  }
  synchronized_ = true;
}

void DistributedOptimizer::synchronize() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pass_ < options_.backward_passes_per_step - 1) {
    throw Error(fmt::format(
        "DistributedOptimizer: synchronize() on backward pass {} of {}: gradients are reduced only "
        "on the last pass of a step",
        pass_ + 1, options_.backward_passes_per_step));
  }
  synchronize_locked();
}

bool DistributedOptimizer::step() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (pass_ < options_.backward_passes_per_step - 1) {
    ++pass_;
    return false;
  }
  synchronize_locked();
  reset_step();
  optimizer_.step(params_);
  return true;
}

}  // namespace herd
