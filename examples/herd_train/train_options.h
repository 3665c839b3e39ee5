// herd-train's command line: the options, their defaults and their checks.
//
// Every option is also read from an environment variable HERD_<NAME> (the
// long name upper-cased, '-' -> '_': --batch-size <-> HERD_BATCH_SIZE); the
// command line wins over the environment. The names and defaults follow the
// configuration table of MXNet's distributed-training guide (--kvstore,
// --learning-rate, --batch-size per rank, --communication,
// --gradient-accumulation, --data-threads). docs/training.md has the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd_train {

struct TrainOptions {
  std::string kvstore;  // "local" | "dist_sync"; empty: local for 1 process, else dist_sync
  std::string communication = "sync";  // "sync" | "async" (async is refused)
  double learning_rate = 0.01;
  int64_t batch_size = 32;  // per rank
  int gradient_accumulation = 1;
  int data_threads = 4;
  int epochs = 3;
  uint64_t seed = 42;
  std::string data_dir;           // empty: the Debian package's directory
  std::string optimizer = "sgd";  // "sgd" | "adam"
  double momentum = 0.9;          // SGD only
  double weight_decay = 0;
  std::string lr_schedule = "cosine";  // "constant" | "cosine" | "step"
  double warmup_epochs = 0.5;
  double lr_step_epochs =
      2;  // --lr-schedule step: multiply by lr_step_gamma every this many epochs
  double lr_step_gamma = 0.1;
  bool scale_lr = true;  // learning rate x number of ranks
  std::vector<int64_t> hidden = {256, 128};
  std::string checkpoint;           // written by rank 0 after every epoch when set
  bool resume = false;              // load `checkpoint` and continue from its epoch
  int64_t max_steps_per_epoch = 0;  // 0: all
  bool print_checksum = false;
  bool quiet = false;  // no progress bar
};

// Parses the command line (and HERD_* variables). Returns -1 when training
// should go on, else the exit code (0 for --help); only `print` ranks write
// help and errors.
int parse_train_options(int argc, char** argv, bool print, TrainOptions* options);

// Checks what depends on the job (the number of processes) and fills the
// kvstore default. Throws herd::Error with a message for the user.
void finish_train_options(TrainOptions* options, int num_processes);

// One line per option, for the header rank 0 prints.
std::string describe_train_options(const TrainOptions& options);

}  // namespace herd_train
