// Learning-rate schedules as pure functions of the training position.
//
// A training loop asks learning_rate_at(schedule, t) before each step and
// passes the answer to Optimizer::set_learning_rate. Because the rate depends
// only on t, a resumed run gets the same rates as the run that never stopped,
// and every rank computes the same rate without communicating.
//
// t is whatever the schedule's durations are counted in: steps, or epochs
// (possibly fractional, epoch + batch / batches_per_epoch, to warm up and
// decay smoothly within an epoch). t must be >= 0.
//
// Formulas (base = base_lr, W = warmup.duration, s = warmup.start_factor):
//
//   linear warm-up, for t < W:   lr(t) = base * (s + (1 - s) * t / W)
//   after warm-up (t >= W, or always when W = 0), each schedule's own rule:
//   constant:    lr(t) = base
//   step:        lr(t) = base * gamma^floor(t / step_size)                (torch StepLR)
//   multi-step:  lr(t) = base * gamma^(number of milestones m with m <= t) (torch MultiStepLR)
//   cosine:      p = min(1, (t - W) / (total - W))
//                lr(t) = min_lr + (base - min_lr) * (1 + cos(pi * p)) / 2
//   polynomial:  p = min(1, (t - W) / (total - W))
//                lr(t) = end_lr + (base - end_lr) * (1 - p)^power
//
// Step and multi-step count their boundaries from t = 0, as positions in the
// run (the large-batch recipe warms up over 5 epochs and still divides at
// epochs 30, 60, 80); cosine and polynomial decay start at the end of the
// warm-up, from base, and reach their floor at t = total (and stay there).
// With W = 0 each is PyTorch's closed form (cosine: CosineAnnealingLR with
// T_max = total over its first half-period; polynomial: PolynomialLR with
// total_iters = total when end_lr = 0).
//
// Every function throws herd::Error naming the field and its value when a
// schedule is invalid or t is negative. Pure: callable from any thread.
#pragma once

#include <variant>
#include <vector>

namespace herd {

// Ramps the rate linearly from start_factor * base to base over [0, duration).
// duration = 0 turns warm-up off.
struct LinearWarmup {
  double duration = 0;      // >= 0, in the schedule's unit
  double start_factor = 0;  // in [0, 1]: the fraction of base at t = 0
};

struct ConstantLr {
  double base_lr = 0;
  LinearWarmup warmup;
};

struct StepDecay {
  double base_lr = 0;
  double step_size = 1;  // > 0
  double gamma = 0.1;    // >= 0
  LinearWarmup warmup;
};

struct MultiStepDecay {
  double base_lr = 0;
  std::vector<double> milestones;  // non-decreasing, each >= 0
  double gamma = 0.1;              // >= 0
  LinearWarmup warmup;
};

struct CosineDecay {
  double base_lr = 0;
  double total = 1;  // > warmup.duration: where the rate reaches min_lr
  double min_lr = 0;
  LinearWarmup warmup;
};

struct PolynomialDecay {
  double base_lr = 0;
  double total = 1;  // > warmup.duration: where the rate reaches end_lr
  double power = 1;  // > 0; 1 is linear decay
  double end_lr = 0;
  LinearWarmup warmup;
};

// Any of the above, for a program that picks its schedule at run time.
using LrSchedule =
    std::variant<ConstantLr, StepDecay, MultiStepDecay, CosineDecay, PolynomialDecay>;

double learning_rate_at(const ConstantLr& schedule, double t);
double learning_rate_at(const StepDecay& schedule, double t);
double learning_rate_at(const MultiStepDecay& schedule, double t);
double learning_rate_at(const CosineDecay& schedule, double t);
double learning_rate_at(const PolynomialDecay& schedule, double t);
double learning_rate_at(const LrSchedule& schedule, double t);

// The large-batch recipe (Goyal et al., "Accurate, Large Minibatch SGD"):
// with num_ranks ranks each taking the single-process batch, the global batch
// is num_ranks times larger, so the rate is too:
//   scaled_learning_rate(base, n) = base * n
// and the warm-up starts from the single-process rate, as Horovod's
// LearningRateWarmupCallback does:
//   large_batch_warmup(n, duration) = {duration, 1 / n}
// Both throw herd::Error when num_ranks < 1.
double scaled_learning_rate(double base_lr, int num_ranks);
LinearWarmup large_batch_warmup(int num_ranks, double duration);

}  // namespace herd
