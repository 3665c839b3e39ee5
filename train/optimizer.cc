// herd::Optimizer (include/herd/train/optimizer.h): the state every optimizer keeps
// (slot buffers per parameter, the step counter), the checks on what step()
// and import_state() receive, and the learning rate.
#include <fmt/format.h>

#include <cmath>
#include <unordered_set>

#include "herd/error.h"
#include "herd/train/optimizer.h"

namespace herd {

Optimizer::Optimizer(double learning_rate, std::vector<std::string> slot_names)
    : learning_rate_(0), slot_names_(std::move(slot_names)) {
  set_learning_rate(learning_rate);
}

void Optimizer::set_learning_rate(double lr) {
  if (!std::isfinite(lr) || lr < 0) {
    throw Error(
        fmt::format("optimizer: learning rate {} is invalid; it must be finite and >= 0", lr));
  }
  learning_rate_ = lr;
}

std::string Optimizer::buffer_name(const ParamState& state, std::size_t slot) const {
  return state.name + "/" + slot_names_[slot];
}

std::vector<std::size_t> Optimizer::match_params(const std::vector<Parameter>& params) {
  std::unordered_set<std::string> seen;
  for (const Parameter& p : params) {
    if (!seen.insert(p.name()).second) {
      throw Error(fmt::format("optimizer: parameter '{}' is given twice", p.name()));
    }
  }
  if (params_.empty()) {
    // First call: register the parameters, in the given order, with zeroed
    // slots. Built aside so that a throw leaves nothing half-registered.
    std::vector<ParamState> states;
    std::unordered_map<std::string, std::size_t> index;
    for (const Parameter& p : params) {
      ParamState state{p.name(), p.size(), {}};
      state.slots.assign(slot_names_.size(), std::vector<float>(p.size(), 0.0f));
      index.emplace(p.name(), states.size());
      states.push_back(std::move(state));
    }
    params_ = std::move(states);
    index_ = std::move(index);
  }
  std::vector<std::size_t> positions;
  positions.reserve(params.size());
  for (const Parameter& p : params) {
    auto it = index_.find(p.name());
    if (it == index_.end()) {
      throw Error(fmt::format(
          "optimizer: parameter '{}' is not one of the {} parameters the optimizer holds state for",
          p.name(), params_.size()));
    }
    const ParamState& state = params_[it->second];
    if (state.size != p.size()) {
      throw Error(fmt::format("optimizer: parameter '{}' has {} elements; its state has {}",
                              p.name(), p.size(), state.size));
    }
    positions.push_back(it->second);
  }
  if (params.size() != params_.size()) {
    // Every given name is registered and none repeats, so some registered
    // parameter is missing; name the first.
    for (const ParamState& state : params_) {
      if (seen.count(state.name) == 0) {
        throw Error(fmt::format(
            "optimizer: got {} parameters, the optimizer holds state for {}; '{}' is missing",
            params.size(), params_.size(), state.name));
      }
    }
  }
  return positions;
}

void Optimizer::init_state(const std::vector<Parameter>& params) { match_params(params); }

void Optimizer::step(const std::vector<Parameter>& params) {
  const std::vector<std::size_t> positions = match_params(params);
  ++step_;
  std::vector<float*> slots(slot_names_.size());
  for (std::size_t i = 0; i < params.size(); ++i) {
    ParamState& state = params_[positions[i]];
    for (std::size_t k = 0; k < slots.size(); ++k) slots[k] = state.slots[k].data();
    update(params[i], slots, step_);
  }
}

OptimizerState Optimizer::export_state() const {
  OptimizerState out;
  out.step = step_;
  for (const ParamState& state : params_) {
    for (std::size_t k = 0; k < slot_names_.size(); ++k) {
      out.buffers.push_back(StateBuffer{buffer_name(state, k), state.slots[k]});
    }
  }
  return out;
}

void Optimizer::import_state(const OptimizerState& state) {
  if (params_.empty()) {
    throw Error(
        "optimizer: import_state before the parameters are known; call init_state(params) first so "
        "that the buffers' names and sizes can be checked");
  }
  if (state.step < 0) {
    throw Error(fmt::format("optimizer: imported step count {} is negative", state.step));
  }
  // Where each expected buffer is; every imported buffer must land on one.
  std::unordered_map<std::string, std::vector<float>*> targets;
  for (ParamState& param : params_) {
    for (std::size_t k = 0; k < slot_names_.size(); ++k) {
      targets.emplace(buffer_name(param, k), &param.slots[k]);
    }
  }
  std::unordered_set<std::string> seen;
  for (const StateBuffer& buffer : state.buffers) {
    auto it = targets.find(buffer.name);
    if (it == targets.end()) {
      throw Error(fmt::format("optimizer: imported state buffer '{}' matches no parameter and slot",
                              buffer.name));
    }
    if (!seen.insert(buffer.name).second) {
      throw Error(fmt::format("optimizer: imported state buffer '{}' appears twice", buffer.name));
    }
    if (buffer.values.size() != it->second->size()) {
      throw Error(fmt::format("optimizer: imported state buffer '{}' has {} elements, expected {}",
                              buffer.name, buffer.values.size(), it->second->size()));
    }
  }
  if (seen.size() != targets.size()) {
    for (const ParamState& param : params_) {
      for (std::size_t k = 0; k < slot_names_.size(); ++k) {
        if (seen.count(buffer_name(param, k)) == 0) {
          throw Error(
              fmt::format("optimizer: imported state has {} buffers, expected {}; '{}' is missing",
                          state.buffers.size(), targets.size(), buffer_name(param, k)));
        }
      }
    }
  }
  // All checked: now replace.
  for (const StateBuffer& buffer : state.buffers) *targets[buffer.name] = buffer.values;
  step_ = state.step;
}

}  // namespace herd
