// herd-train's training loop: data-parallel SGD/Adam on Fashion-MNIST through
// the engine --kvstore names (gradient_exchange.h), per-epoch evaluation,
// checkpoints and resume, and the straggler option (--slow-rank).
#pragma once

#include "herd_train/train_options.h"

namespace herd_train {

// Exit code when the dataset is missing (ctest's SKIP_RETURN_CODE).
constexpr int kExitDataMissing = 77;

// Trains as `options` say, after herd::init() (and finish_train_options()).
// Every worker calls it (parameter-server ranks never get here). Returns 0; throws herd::Error on
// bad data, a bad checkpoint or a failed collective (the same on every rank when the cause is a
// file every rank reads).
int run_training(const TrainOptions& options);

}  // namespace herd_train
