// Learning-rate schedules (include/herd/train/lr_schedule.h): each checks its
// fields, applies the linear warm-up, then its own closed form.
#include "herd/train/lr_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "herd/error.h"

namespace herd {
namespace {

constexpr double kPi = 3.14159265358979323846;

void require(bool ok, const char* schedule, const char* field, double value) {
  if (!ok) throw Error(fmt::format("{}: {} {} is invalid", schedule, field, value));
}

// Checks what every schedule shares; true while t is inside the warm-up,
// with the warmed-up rate in *lr.
bool in_warmup(const char* schedule, double base_lr, const LinearWarmup& warmup, double t,
               double* lr) {
  require(std::isfinite(base_lr) && base_lr >= 0, schedule, "base_lr", base_lr);
  require(std::isfinite(t) && t >= 0, schedule, "position t (must be >= 0)", t);
  require(std::isfinite(warmup.duration) && warmup.duration >= 0, schedule, "warmup.duration",
          warmup.duration);
  require(warmup.start_factor >= 0 && warmup.start_factor <= 1, schedule,
          "warmup.start_factor (must be in [0, 1])", warmup.start_factor);
  if (t >= warmup.duration) return false;
  const double s = warmup.start_factor;
  *lr = base_lr * (s + (1 - s) * t / warmup.duration);
  return true;
}

void require_total(const char* schedule, double total, const LinearWarmup& warmup) {
  require(std::isfinite(total) && total > warmup.duration, schedule,
          "total (must be > warmup.duration)", total);
}

// Progress through [W, total] for the decays that start after the warm-up.
double decay_progress(double total, const LinearWarmup& warmup, double t) {
  return std::min(1.0, (t - warmup.duration) / (total - warmup.duration));
}

}  // namespace

double learning_rate_at(const ConstantLr& c, double t) {
  double lr = 0;
  if (in_warmup("ConstantLr", c.base_lr, c.warmup, t, &lr)) return lr;
  return c.base_lr;
}

double learning_rate_at(const StepDecay& c, double t) {
  require(std::isfinite(c.step_size) && c.step_size > 0, "StepDecay", "step_size", c.step_size);
  require(std::isfinite(c.gamma) && c.gamma >= 0, "StepDecay", "gamma", c.gamma);
  double lr = 0;
  if (in_warmup("StepDecay", c.base_lr, c.warmup, t, &lr)) return lr;
  return c.base_lr * std::pow(c.gamma, std::floor(t / c.step_size));
}

double learning_rate_at(const MultiStepDecay& c, double t) {
  require(std::isfinite(c.gamma) && c.gamma >= 0, "MultiStepDecay", "gamma", c.gamma);
  for (std::size_t i = 0; i < c.milestones.size(); ++i) {
    require(std::isfinite(c.milestones[i]) && c.milestones[i] >= 0, "MultiStepDecay", "milestone",
            c.milestones[i]);
    if (i > 0 && c.milestones[i] < c.milestones[i - 1]) {
      throw Error(fmt::format("MultiStepDecay: milestones must not decrease; {} follows {}",
                              c.milestones[i], c.milestones[i - 1]));
    }
  }
  double lr = 0;
  if (in_warmup("MultiStepDecay", c.base_lr, c.warmup, t, &lr)) return lr;
  const auto passed =
      std::upper_bound(c.milestones.begin(), c.milestones.end(), t) - c.milestones.begin();
  return c.base_lr * std::pow(c.gamma, static_cast<double>(passed));
}

double learning_rate_at(const CosineDecay& c, double t) {
  require(std::isfinite(c.min_lr) && c.min_lr >= 0, "CosineDecay", "min_lr", c.min_lr);
  require_total("CosineDecay", c.total, c.warmup);
  double lr = 0;
  if (in_warmup("CosineDecay", c.base_lr, c.warmup, t, &lr)) return lr;
  const double p = decay_progress(c.total, c.warmup, t);
  return c.min_lr + (c.base_lr - c.min_lr) * (1 + std::cos(kPi * p)) / 2;
}

double learning_rate_at(const PolynomialDecay& c, double t) {
  require(std::isfinite(c.power) && c.power > 0, "PolynomialDecay", "power", c.power);
  require(std::isfinite(c.end_lr) && c.end_lr >= 0, "PolynomialDecay", "end_lr", c.end_lr);
  require_total("PolynomialDecay", c.total, c.warmup);
  double lr = 0;
  if (in_warmup("PolynomialDecay", c.base_lr, c.warmup, t, &lr)) return lr;
  const double p = decay_progress(c.total, c.warmup, t);
  return c.end_lr + (c.base_lr - c.end_lr) * std::pow(1 - p, c.power);
}

double learning_rate_at(const LrSchedule& schedule, double t) {
  return std::visit([t](const auto& s) { return learning_rate_at(s, t); }, schedule);
}

double scaled_learning_rate(double base_lr, int num_ranks) {
  if (num_ranks < 1) {
    throw Error(fmt::format("scaled_learning_rate: num_ranks {} must be >= 1", num_ranks));
  }
  return base_lr * num_ranks;
}

LinearWarmup large_batch_warmup(int num_ranks, double duration) {
  if (num_ranks < 1) {
    throw Error(fmt::format("large_batch_warmup: num_ranks {} must be >= 1", num_ranks));
  }
  return LinearWarmup{duration, 1.0 / num_ranks};
}

}  // namespace herd
