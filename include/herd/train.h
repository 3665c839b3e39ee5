// herd's training library (libherd_train, CMake target herd::train): every
// header of include/herd/train/. Optimizers, learning-rate schedules, the
// distributed sampler and checkpoint files work in a single process;
// DistributedOptimizer and the broadcasts of parameters and optimizer state
// make a loop data-parallel over herd's collectives (herd/herd.h).
#pragma once

#include "herd/train/checkpoint.h"
#include "herd/train/distributed_optimizer.h"
#include "herd/train/lr_schedule.h"
#include "herd/train/optimizer.h"
#include "herd/train/progress.h"
#include "herd/train/sampler.h"
