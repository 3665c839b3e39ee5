// Data-parallel training: herd::DistributedOptimizer averages every gradient
// across ranks before an inner herd::Optimizer applies it, and
// broadcast_parameters / broadcast_optimizer_state make every rank start from
// the same parameters and optimizer state (Horovod's DistributedOptimizer,
// broadcast_parameters and broadcast_optimizer_state).
//
// The training loop changes in three places (docs/training.md):
//
//   herd::DistributedOptimizer opt(sgd, params);            // wrap the optimizer
//   herd::broadcast_parameters(params, 0);                  // identical start
//   herd::broadcast_optimizer_state(sgd, params, 0);
//   for (...) {
//     backward();   // calls opt.grad_ready(param) as each gradient is complete
//     opt.step();   // instead of sgd.step(params)
//   }
//
// grad_ready() starts that gradient's allreduce at once (herd::allreduce_async),
// so communication overlaps the rest of the backward pass; step() waits for
// them and runs the inner optimizer. Every rank must make the same calls
// (same parameters, same number of steps), as for any herd collective.
//
// Needs herd::init(). Errors throw herd::Error naming the parameter.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "herd/handle.h"
#include "herd/process_set.h"
#include "herd/train/optimizer.h"
#include "herd/types.h"

namespace herd {

// How a gradient travels between ranks.
enum class Compression {
  kNone,  // float32 as it is
  kFP16,  // converted to an IEEE float16 buffer, allreduced as float16, converted back
};

struct DistributedOptimizerOptions {
  // kAverage (the mean over the ranks) or kSum.
  ReduceOp op = ReduceOp::kAverage;
  // Gradient accumulation: the gradients of k backward passes are summed by
  // the program in grad() and reduced, divided by k, and applied once every k
  // calls of step(). >= 1.
  int backward_passes_per_step = 1;
  // Average only (> 0): each gradient is multiplied by 1/f before the sum and
  // the sum by f/size after it, as Horovod does (f = size averages entirely
  // before the sum). Must be 1 with kSum.
  double gradient_predivide_factor = 1.0;
  Compression compression = Compression::kNone;
  // The ranks that train together; every member makes the same calls.
  ProcessSet process_set = ProcessSet();
  // The allreduce of parameter p is named "<name_prefix>/<p's name>"; two
  // DistributedOptimizers in use at once need different prefixes.
  std::string name_prefix = "DistributedOptimizer";
};

// Wraps `optimizer` (not owned; it must outlive this object) and `params`
// (views over the program's memory, which must stay valid; parameter names
// must be unique).
//
// One training iteration, per rank:
//   1. the backward pass fills each parameter's grad() and calls
//      grad_ready(param) (or grad_ready(name)) once that gradient is final;
//   2. step().
//
// Gradient accumulation (backward_passes_per_step = k > 1): run the iteration
// k times per update. The program *accumulates* the gradients itself: it
// zeroes grad() only after the k-th step() (the one that returns true, or
// when is_final_pass() was true before it) and adds each pass's gradient to
// it. On passes 1..k-1, grad_ready() only checks the parameter and step()
// only counts (it returns false and changes nothing). On pass k grad_ready()
// starts the allreduce, and the reduced gradient is divided by k, so with
// per-pass mean gradients the update equals one pass over the k-fold batch.
//
// The reduction on pass k, for each gradient g (the sum of the k passes):
//   kAverage: g <- (sum over ranks of g / (k f)) * f / size
//   kSum:     g <- sum over ranks of g / k
// and grad() holds the reduced gradient after step() or synchronize().
//
// A gradient never reported ready by grad_ready() is allreduced by step()
// (or synchronize()), after the others have started: forgetting grad_ready
// costs overlap, never correctness, and cannot hang, even when the ranks
// forget different ones (herd matches allreduces by name).
class DistributedOptimizer {
 public:
  // Throws herd::Error when an option is invalid or two parameters share a name.
  DistributedOptimizer(Optimizer& optimizer, std::vector<Parameter> params,
                       DistributedOptimizerOptions options = DistributedOptimizerOptions());
  // Waits for the allreduces still running (ignoring their errors), so no
  // buffer is written after it returns.
  ~DistributedOptimizer();
  DistributedOptimizer(const DistributedOptimizer&) = delete;
  DistributedOptimizer& operator=(const DistributedOptimizer&) = delete;

  // The gradient of `param` (by name; the view given at construction is the
  // one reduced) is complete for this pass. On the last pass of a step it
  // starts the allreduce at once. Throws herd::Error naming the parameter when
  // it is unknown, already reported in this step, reported after
  // synchronize(), or the allreduce cannot be submitted.
  void grad_ready(const Parameter& param);
  void grad_ready(const std::string& name);

  // On the last pass of a step: starts the allreduce of every gradient not
  // yet reported, waits for all of them and leaves the reduced gradients in
  // grad(), without updating the parameters; the next step() then applies
  // them without reducing again (Horovod's synchronize() followed by step()
  // under skip_synchronize). Calling it twice in one step does nothing the
  // second time. On other passes it throws herd::Error (nothing is reduced
  // there). Throws herd::Error naming the parameter when an allreduce failed
  // (after waiting for the others).
  void synchronize();

  // On the last pass of a step: synchronize() (unless already done), then the
  // inner optimizer's step over all parameters; returns true. On the other
  // passes: counts the pass and returns false.
  bool step();

  // True when the next step() is the one that reduces and updates (always,
  // for backward_passes_per_step = 1).
  bool is_final_pass() const;
  // Passes already counted in the current step: 0 .. k-1.
  int pass() const;

  const std::vector<Parameter>& parameters() const { return params_; }
  Optimizer& optimizer() const { return optimizer_; }
  const DistributedOptimizerOptions& options() const { return options_; }

 private:
  struct Slot;
  std::size_t index_of(const std::string& name) const;
  void start(std::size_t i);  // mutex_ held
  void synchronize_locked();  // mutex_ held
  // Waits for every started allreduce; `rethrow` (the normal path, not the
  // destructor): converts float16 results back and throws the first failure.
  void wait_all(bool rethrow);  // mutex_ held
  void reset_step();            // mutex_ held

  Optimizer& optimizer_;
  std::vector<Parameter> params_;
  DistributedOptimizerOptions options_;
  std::vector<Slot> slots_;
  // Parameter name -> index into params_ and slots_; grad_ready looks names up here.
  std::unordered_map<std::string, std::size_t> index_by_name_;
  mutable std::mutex mutex_;
  int pass_ = 0;
  bool synchronized_ = false;
};

// Copies `root`'s parameter values into every rank's (exactly), over
// `process_set`. Every member calls it with the same parameter names and
// sizes, in the same order; otherwise every rank throws herd::Error.
void broadcast_parameters(const std::vector<Parameter>& params, int root,
                          const ProcessSet& process_set = ProcessSet());

// Makes every rank's optimizer state (buffers and step count) a copy of
// `root`'s: init_state(params) (allocating zeroed state if the optimizer has
// none yet), export_state(), a broadcast of every buffer and of the step
// count, import_state(). The optimizers must be of the same kind with the
// same parameters on every rank; otherwise every rank throws herd::Error.
// Hyperparameters (the learning rate) are not state and are not sent.
void broadcast_optimizer_state(Optimizer& optimizer, const std::vector<Parameter>& params, int root,
                               const ProcessSet& process_set = ProcessSet());

}  // namespace herd
