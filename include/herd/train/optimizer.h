// Optimizers that update a training program's own float32 parameters in place.
//
// A training loop names each parameter and its gradient (herd::Parameter, a
// view over the program's memory), and calls Optimizer::step(params) once per
// iteration after the gradients are computed. herd::SGD and herd::Adam follow
// PyTorch's documented algorithms (torch.optim.SGD, Adam and AdamW) exactly;
// a user adds an optimizer by deriving from herd::Optimizer and writing
// update() for one parameter.
//
// The optimizer's state (momentum and moment buffers, one per parameter and
// slot, plus the number of steps taken) can be exported as named float
// buffers and imported into another optimizer of the same kind: that is what
// a broadcast from rank 0 and a checkpoint carry. Hyperparameters, the
// learning rate included, are not state: the program sets them (the learning
// rate usually from a schedule, herd/train/lr_schedule.h).
//
// Single-process and single-threaded: an optimizer and the memory behind its
// parameters belong to one thread at a time. Nothing here communicates.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "herd/types.h"

namespace herd {

// A named float32 parameter and its gradient: two views of `size` contiguous
// floats in the caller's memory, which must outlive every use of the
// Parameter. Copying a Parameter copies the views, not the data; const-ness
// is shallow, as for a span. The constructors throw herd::Error, naming the
// parameter, when a view is not float32 host memory, the sizes differ, a
// pointer is null while the size is not zero, or the two buffers overlap.
class Parameter {
 public:
  Parameter(std::string name, float* value, float* grad, int64_t size);
  Parameter(std::string name, TensorView value, TensorView grad);

  const std::string& name() const { return name_; }
  float* value() const { return value_; }
  float* grad() const { return grad_; }
  int64_t size() const { return size_; }
  // Flat [size] views, e.g. for an allreduce of the gradient.
  TensorView value_view() const { return TensorView{value_, DataType::kFloat32, {size_}}; }
  TensorView grad_view() const { return TensorView{grad_, DataType::kFloat32, {size_}}; }

 private:
  std::string name_;
  float* value_ = nullptr;
  float* grad_ = nullptr;
  int64_t size_ = 0;
};

// One state buffer, named "<parameter name>/<slot>", e.g. "fc1.weight/momentum".
struct StateBuffer {
  std::string name;
  std::vector<float> values;
};

// An optimizer's whole state: its buffers in the order the parameters were
// first registered (slots in the optimizer's order within each parameter),
// and the number of steps taken.
struct OptimizerState {
  int64_t step = 0;
  std::vector<StateBuffer> buffers;
};

// The base of every optimizer. It keeps the per-parameter state buffers and
// the step counter, checks what step() and import_state() are given, and
// calls update() once per parameter; a derived class supplies its slot names
// and the arithmetic.
//
// The parameter set is fixed by the first init_state() or step(): later
// calls must pass the same names with the same sizes (in any order), so that
// every buffer always belongs to exactly one parameter and the step counter
// means the same for all of them.
class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Applies one update to every parameter from its gradient at learning_rate(),
  // allocating zeroed state on the first call. Throws herd::Error, changing
  // nothing, when the parameters differ from the registered ones.
  void step(const std::vector<Parameter>& params);

  // Registers `params` and allocates their state, zeroed, without updating
  // anything: needed before import_state() and before exporting the state of
  // an optimizer that has not stepped yet (the shape of a broadcast).
  // Calling it again with the same parameters does nothing.
  void init_state(const std::vector<Parameter>& params);
  bool has_state() const { return !params_.empty(); }

  // Steps taken so far (the imported value after import_state()).
  int64_t step_count() const { return step_; }

  double learning_rate() const { return learning_rate_; }
  // Throws herd::Error when `lr` is negative or not finite.
  void set_learning_rate(double lr);

  OptimizerState export_state() const;
  // Replaces the state with `state`, which must hold exactly the buffers
  // export_state() would give (same names, same sizes, any order) and a step
  // count >= 0. Throws herd::Error naming the buffer and both sizes, changing
  // nothing, otherwise; and when init_state() or step() has not run yet.
  void import_state(const OptimizerState& state);

 protected:
  // `slot_names`: the state buffers every parameter gets, e.g. {"momentum"}.
  Optimizer(double learning_rate, std::vector<std::string> slot_names);

  // Updates `param.value()` in place from `param.grad()`. `slots[k]` points at
  // param.size() floats of slot k (slot_names' order); `step` is 1 on the
  // first step, as PyTorch's t.
  virtual void update(const Parameter& param, const std::vector<float*>& slots, int64_t step) = 0;

 private:
  struct ParamState {
    std::string name;
    int64_t size = 0;
    std::vector<std::vector<float>> slots;  // [slot][element]
  };

  // Throws unless `params` are exactly the registered parameters (registering
  // them when none are); returns, for each of params, its ParamState index.
  std::vector<std::size_t> match_params(const std::vector<Parameter>& params);
  std::string buffer_name(const ParamState& state, std::size_t slot) const;

  double learning_rate_;
  std::vector<std::string> slot_names_;
  std::vector<ParamState> params_;  // registration order
  std::unordered_map<std::string, std::size_t> index_;
  int64_t step_ = 0;
};

// torch.optim.SGD. With g the gradient, w the parameter, t the step:
//   g <- g + weight_decay * w                          (if weight_decay != 0)
//   b <- g if t == 1, else momentum * b + (1 - dampening) * g   (if momentum != 0)
//   g <- g + momentum * b if nesterov, else b          (if momentum != 0)
//   w <- w - lr * g
// State: one slot "momentum" (b) when momentum != 0, none otherwise.
struct SGDOptions {
  double lr = 1e-3;         // >= 0
  double momentum = 0;      // >= 0
  double dampening = 0;     // must be 0 with nesterov
  double weight_decay = 0;  // >= 0; L2 penalty added to the gradient
  bool nesterov = false;    // needs momentum > 0 and dampening == 0
};

class SGD : public Optimizer {
 public:
  // Throws herd::Error naming the option and its value when one is invalid.
  explicit SGD(const SGDOptions& options);
  const SGDOptions& options() const { return options_; }

 protected:
  void update(const Parameter& param, const std::vector<float*>& slots, int64_t step) override;

 private:
  SGDOptions options_;
};

// torch.optim.Adam, and torch.optim.AdamW when decoupled_weight_decay is set.
// With g the gradient, w the parameter, t the step:
//   w <- w * (1 - lr * weight_decay)              (decoupled: AdamW)
//   g <- g + weight_decay * w                      (coupled: Adam's L2 penalty)
//   m <- beta1 * m + (1 - beta1) * g
//   v <- beta2 * v + (1 - beta2) * g * g
//   w <- w - (lr / (1 - beta1^t)) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// State: slots "exp_avg" (m) and "exp_avg_sq" (v).
struct AdamOptions {
  double lr = 1e-3;                     // >= 0
  double beta1 = 0.9;                   // in [0, 1)
  double beta2 = 0.999;                 // in [0, 1)
  double eps = 1e-8;                    // > 0
  double weight_decay = 0;              // >= 0 (PyTorch's AdamW defaults to 1e-2)
  bool decoupled_weight_decay = false;  // true: AdamW
};

class Adam : public Optimizer {
 public:
  // Throws herd::Error naming the option and its value when one is invalid.
  explicit Adam(const AdamOptions& options);
  const AdamOptions& options() const { return options_; }

 protected:
  void update(const Parameter& param, const std::vector<float*>& slots, int64_t step) override;

 private:
  AdamOptions options_;
};

}  // namespace herd
