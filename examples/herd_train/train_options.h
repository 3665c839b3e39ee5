// herd-train's command line: the options, their defaults and their checks.
//
// Every option is also read from an environment variable HERD_<NAME> (the
// long name upper-cased, '-' -> '_': --batch-size <-> HERD_BATCH_SIZE); the
// command line wins over the environment. The names and defaults follow the
// configuration table of MXNet's distributed-training guide (--kvstore,
// --learning-rate, --batch-size per rank, --communication, --num-servers,
// --gradient-compression, --gradient-accumulation, --data-threads).
// docs/training.md has the table.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd_train {

// What moves the gradients and applies the updates; follows from --kvstore.
enum class Engine {
  kAllreduce,       // horovod: herd::DistributedOptimizer, no store
  kLocalStore,      // local, device: a KVStore in this single process
  kReplicas,        // dist_sync, dist_device_sync: every worker's replica, over allreduce
  kParameterServer  // dist_async: parameter-server ranks apply each push
};

struct TrainOptions {
  // local | device | dist_sync | dist_device_sync | dist_async | horovod;
  // empty: local for 1 process, horovod for more (dist_async with --communication async).
  std::string kvstore;
  std::string communication;  // sync | async; empty: follows --kvstore
  // The job's last ranks serve dist_async (HERD_NUM_SERVERS); -1: herd's count.
  int num_servers = -1;
  std::string gradient_compression = "none";  // none | 2bit | 1bit (KVStore types only)
  double compression_threshold = 0.5;
  double learning_rate = 0.01;
  int64_t batch_size = 32;  // per rank
  int gradient_accumulation = 1;
  int data_threads = 4;
  int epochs = 3;
  uint64_t seed = 42;
  std::string data_dir;  // empty: the Debian package's directory
  // A .rec file of image records (header + raw pixels) to train on instead
  // of the IDX training set, each worker reading its part; PATH.idx beside
  // it, when it exists, splits it by index, else by byte range.
  std::string data;
  std::string val_data;  // a .rec file for the test accuracy instead of the IDX test set
  // How the IDX training samples are split among the workers: "strided"
  // (herd::DistributedSampler) or "parts" (contiguous parts, each shuffled
  // on its own: the order of a .rec file's parts). Empty: strided for IDX,
  // parts with --data (the only way a .rec file is read); set by
  // finish_train_options.
  std::string data_sharding;
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
  std::string checkpoint;  // written by rank 0 after every epoch when set
  bool resume = false;     // load `checkpoint` and continue from its epoch
  // Rank 0 also writes `checkpoint` after every this many updates (0: at the
  // ends of epochs only); a relaunched job (HERD_RESTART_COUNT > 0) resumes
  // from it mid-epoch.
  int64_t commit_every = 0;
  // For restart tests: on a job's first launch, worker `kill_rank` ends
  // itself with SIGKILL right after update `kill_at_step` (-1: never).
  int kill_rank = -1;
  int64_t kill_at_step = 0;
  int64_t max_steps_per_epoch = 0;  // 0: all
  int64_t max_test_samples = 0;     // 0: all; the IDX test set's first this many
  bool print_checksum = false;
  bool print_step_rates = false;  // rank 0 prints every worker's steps/s at the end
  int slow_rank = -1;             // this worker sleeps (slow_factor - 1) x its compute per step
  double slow_factor = 1;
  double device_ms = 0;           // every step also waits this long, as if a device computed
  std::string progress = "auto";  // auto | always | never (herd/train/progress.h)
  double progress_interval = 5;   // seconds between progress lines when not in place
  bool quiet = false;             // --progress never

  Engine engine = Engine::kAllreduce;  // set by finish_train_options
};

// herd reads HERD_NUM_SERVERS in herd::init(), so --num-servers must reach
// the environment before it. Exports the value of a --num-servers on the
// command line; returns a message (and exports nothing) when the variable is
// already set to another value, else an empty string.
std::string export_num_servers(int argc, char** argv);

// Parses the command line (and HERD_* variables). Returns -1 when training
// should go on, else the exit code (0 for --help); only `print` ranks write
// help and errors.
int parse_train_options(int argc, char** argv, bool print, TrainOptions* options);

// Checks what depends on the job and fills the defaults that do (the kvstore,
// the communication, the engine): `num_workers` ranks train, `num_servers`
// serve (herd's count, from HERD_NUM_SERVERS). Throws herd::Error with a
// message for the user.
void finish_train_options(TrainOptions* options, int num_workers, int num_servers);

// "allreduce", "a store in this process", "replicas over allreduce" or
// "parameter servers (S servers)", for the banner.
std::string describe_engine(const TrainOptions& options);

// One line per option, for the header rank 0 prints.
std::string describe_train_options(const TrainOptions& options);

}  // namespace herd_train
