// How herd-train turns each step's gradients into new parameters: one
// implementation per engine (TrainOptions::engine), so that the training
// loop is the same for all of them.
//
//   horovod      AllreduceExchange: herd::DistributedOptimizer averages the
//                gradients (an allreduce per layer, started by the backward
//                hook), then every rank's own optimizer applies them.
//   local, device, dist_sync, dist_device_sync, dist_async
//                StoreExchange: a herd::kv::KVStore holds the parameters and
//                its optimizer (set_optimizer) updates them. A step pushes
//                every gradient in one multi-key call and pulls every weight
//                in one. The store sums the pushes over the workers, so the
//                gradients are normalised by the store's rescale_grad:
//                  local, device   1 / k
//                  dist_sync       1 / (workers * k), the mean over the
//                                  workers: the same update as horovod
//                  dist_async      1 / k: each push is applied alone, as the
//                                  update of one worker's batch
//                (k = --gradient-accumulation; the model's gradient is
//                already the mean over its batch). The learning-rate schedule
//                runs in the store, counted in updates: the synchronous
//                stores apply one per step, the parameter servers one per
//                push of any worker, so their schedule is the one-worker
//                schedule (no --scale-lr factor) stretched over
//                workers x steps per epoch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "herd/train/checkpoint.h"
#include "herd/train/lr_schedule.h"
#include "herd/train/optimizer.h"
#include "herd_train/train_options.h"

namespace herd_train {

class GradientExchange {
 public:
  virtual ~GradientExchange() = default;

  // The backward hook: the gradients of `layer` are final for this pass.
  virtual void grad_ready(const std::vector<herd::Parameter>& layer) = 0;
  // After every backward pass; `position` is the pass's fractional epoch.
  // On the last pass of an update (every --gradient-accumulation passes) it
  // exchanges the gradients, updates the parameters and returns true.
  virtual bool step(double position) = 0;
  // Makes the parameters the model evaluates the current ones (dist_async:
  // waits for every worker, then pulls from the servers).
  virtual void refresh_parameters() = 0;
  // Rank 0 writes the parameters and the optimizer state to `path`.
  virtual void save_checkpoint(const std::string& path, int64_t step, int64_t epoch, uint64_t seed,
                               const std::map<std::string, std::string>& metadata) = 0;
};

// The rate schedule of a run over `ranks` synchronous ranks, in fractional
// epochs (--lr-schedule, --warmup-epochs, --scale-lr).
herd::LrSchedule make_epoch_schedule(const TrainOptions& options, int ranks);

// `schedule` with every duration (warm-up, step size, milestones, total)
// multiplied by `units_per_epoch`: the same rates, counted in updates.
herd::LrSchedule stretch_schedule(const herd::LrSchedule& schedule, double units_per_epoch);

// The exchange of `options.engine` over `params` (views that outlive it),
// with `updates_per_epoch` updates of each worker per epoch. Every worker
// starts from rank 0's parameters and optimizer state, or from `resume`
// (loaded from `resume_path`) when it is set. Every worker calls it.
std::unique_ptr<GradientExchange> make_gradient_exchange(const TrainOptions& options,
                                                         const std::vector<herd::Parameter>& params,
                                                         int64_t updates_per_epoch,
                                                         const herd::Checkpoint* resume,
                                                         const std::string& resume_path);

}  // namespace herd_train
