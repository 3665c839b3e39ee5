#include "herd_train/train_options.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <CLI/CLI.hpp>

#include "herd/error.h"

namespace herd_train {
namespace {

std::string env_name(const std::string& flag) {
  std::string name = "HERD_";
  // The first name of "--name,!--no-name".
  for (char c : flag.substr(
           2, flag.find(',') == std::string::npos ? std::string::npos : flag.find(',') - 2)) {
    name += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return name;
}

template <typename T>
CLI::Option* add(CLI::App& app, const std::string& flag, T& value, const std::string& help) {
  return app.add_option(flag, value, help)->envname(env_name(flag));
}

CLI::Option* add_flag(CLI::App& app, const std::string& flag, bool& value,
                      const std::string& help) {
  return app.add_flag(flag, value, help)->envname(env_name(flag));
}

}  // namespace

int parse_train_options(int argc, char** argv, bool print, TrainOptions* options) {
  TrainOptions& o = *options;
  CLI::App app{
      "herd-train: data-parallel training of a multilayer perceptron on Fashion-MNIST with "
      "herd::DistributedOptimizer. Run it under mpirun; every option can also be set by the "
      "environment variable shown (the command line wins)."};
  app.option_defaults()->always_capture_default();
  add(app, "--kvstore", o.kvstore,
      "How gradients become updates: horovod (allreduce of the gradients, every rank's "
      "optimizer applies their mean), local or device (a KVStore in this one process), "
      "dist_sync or dist_device_sync (a KVStore replica on every worker, updated from the "
      "allreduced pushes), dist_async (parameter-server ranks apply each worker's push as it "
      "arrives; needs --num-servers). Default: local for 1 process, horovod for more, "
      "dist_async with --communication async")
      ->check(CLI::IsMember(
          {"local", "device", "dist_sync", "dist_device_sync", "dist_async", "horovod"}))
      ->default_str("local|horovod");
  add(app, "--learning-rate,--lr", o.learning_rate, "Base learning rate")
      ->check(CLI::NonNegativeNumber);
  add(app, "--batch-size", o.batch_size, "Samples per step on each rank")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  add(app, "--communication", o.communication,
      "sync (every step waits for every worker's gradient) or async (each worker's gradient is "
      "applied by the parameter servers as it arrives: --kvstore dist_async). Default: follows "
      "--kvstore")
      ->check(CLI::IsMember({"sync", "async"}))
      ->default_str("sync|async");
  add(app, "--num-servers", o.num_servers,
      "Parameter-server ranks for --kvstore dist_async: the job's last this many ranks serve, "
      "the others train. Sets HERD_NUM_SERVERS for herd (an already-set HERD_NUM_SERVERS must "
      "agree)")
      ->check(CLI::Range(0, 1 << 20))
      ->default_str("HERD_NUM_SERVERS or 0");
  add(app, "--gradient-compression", o.gradient_compression,
      "KVStore gradient compression with error feedback: 2bit (+threshold, -threshold or 0 per "
      "value), 1bit (sign) or none; only for the distributed KVStore types")
      ->check(CLI::IsMember({"none", "2bit", "1bit"}));
  add(app, "--compression-threshold", o.compression_threshold,
      "--gradient-compression 2bit: the threshold (> 0)")
      ->check(CLI::NonNegativeNumber);
  add(app, "--gradient-accumulation", o.gradient_accumulation,
      "Backward passes per update (backward_passes_per_step): gradients of this many batches "
      "are summed, allreduced and averaged before one update")
      ->check(CLI::Range(1, 1 << 16));
  add(app, "--data-threads", o.data_threads,
      "Threads that assemble batches ahead of the training thread (MXNet's loader threads), "
      "into at most 2 x this many batch buffers; batches and results do not depend on it")
      ->check(CLI::Range(1, 1024));
  add(app, "--epochs", o.epochs, "Epochs to train (in all, counting those before --resume)")
      ->check(CLI::Range(1, 1 << 20));
  add(app, "--seed", o.seed, "Seed of the model's initialization and of the data order");
  add(app, "--data-dir", o.data_dir,
      "Directory with the Fashion-MNIST IDX files (default: /usr/share/datasets/fashion-mnist, "
      "from the Debian package dataset-fashion-mnist)");
  add(app, "--data", o.data,
      "A RecordIO file (.rec) of image records (MXNet's image header, then the raw pixels, "
      "all of one size; herd-rec pack makes one from IDX files) to train on instead of the "
      "IDX training set. Each worker reads its part (num_parts = workers, part_index = rank): "
      "by index when PATH.idx exists beside it, else by byte range");
  add(app, "--val-data", o.val_data,
      "A RecordIO file of image records for the test accuracy, instead of the IDX test set; "
      "each worker evaluates its part. Without it, --data trains with no accuracy");
  add(app, "--data-sharding", o.data_sharding,
      "How the workers split the training samples: strided (each epoch one shuffled order, "
      "worker r takes positions r, r + workers, ...) or parts (contiguous parts as a .rec "
      "file's index splits them, each shuffled on its own, the shorter ones padded from "
      "their start; what --data does). Default: strided for IDX, parts with --data")
      ->check(CLI::IsMember({"strided", "parts"}))
      ->default_str("strided|parts");
  add(app, "--optimizer", o.optimizer, "Inner optimizer: sgd (with --momentum) or adam")
      ->check(CLI::IsMember({"sgd", "adam"}));
  add(app, "--momentum", o.momentum, "SGD momentum")->check(CLI::Range(0.0, 1.0));
  add(app, "--weight-decay", o.weight_decay, "L2 penalty added to the gradient")
      ->check(CLI::NonNegativeNumber);
  add(app, "--lr-schedule", o.lr_schedule,
      "constant, cosine (to 0 at the last epoch) or step (x --lr-step-gamma every "
      "--lr-step-epochs epochs); positions count in fractional epochs")
      ->check(CLI::IsMember({"constant", "cosine", "step"}));
  add(app, "--warmup-epochs", o.warmup_epochs,
      "Linear warm-up over this many epochs (from 1/ranks of the rate with --scale-lr, else "
      "from 0)")
      ->check(CLI::NonNegativeNumber);
  add(app, "--lr-step-epochs", o.lr_step_epochs, "--lr-schedule step: epochs between decays")
      ->check(CLI::PositiveNumber);
  add(app, "--lr-step-gamma", o.lr_step_gamma, "--lr-schedule step: decay factor")
      ->check(CLI::NonNegativeNumber);
  add_flag(app, "--scale-lr,!--no-scale-lr", o.scale_lr,
           "Multiply the learning rate by the number of ranks (the large-batch recipe); "
           "--no-scale-lr keeps it");
  add(app, "--hidden", o.hidden, "Hidden layer sizes, comma-separated")
      ->delimiter(',')
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 16));
  add(app, "--checkpoint", o.checkpoint,
      "Checkpoint file: rank 0 writes it (atomically) after every epoch");
  add_flag(app, "--resume", o.resume,
           "Every rank loads --checkpoint and training continues where it was written (a "
           "relaunched job, HERD_RESTART_COUNT > 0, resumes by itself when the file exists)");
  add(app, "--commit-every", o.commit_every,
      "With --checkpoint: rank 0 also writes it after every this many updates, so that a job "
      "relaunched after a failure (herdrun --max-restarts) redoes at most this many; 0: at the "
      "ends of epochs only")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  add(app, "--kill-rank", o.kill_rank,
      "For restart tests (-1: none): on a job's first launch (HERD_RESTART_COUNT unset or 0) "
      "this worker ends itself with SIGKILL right after update --kill-at-step")
      ->check(CLI::Range(-1, 1 << 20));
  add(app, "--kill-at-step", o.kill_at_step,
      "The update (counted from the start of training) after which --kill-rank ends itself")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  add(app, "--max-steps-per-epoch", o.max_steps_per_epoch,
      "Stop each epoch after this many steps (0: the whole training set), for tests")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  add(app, "--max-test-samples", o.max_test_samples,
      "Evaluate the accuracy on the first this many samples of the IDX test set (0: all), "
      "for tests whose checks do not read the accuracy")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  add_flag(app, "--print-checksum", o.print_checksum,
           "At the end, rank 0 prints 'checksum: <hex>' (FNV-1a over all parameter bytes)");
  add_flag(app, "--print-step-rates", o.print_step_rates,
           "At the end, rank 0 prints 'steps/s: <worker 0> <worker 1> ...': each worker's "
           "training steps per second of its own training time (evaluation excluded)");
  add(app, "--slow-rank", o.slow_rank,
      "Worker made slow for straggler benchmarks (-1: none): after each backward pass it "
      "sleeps (--slow-factor - 1) times that step's compute time")
      ->check(CLI::Range(-1, 1 << 20));
  add(app, "--slow-factor", o.slow_factor,
      "How many times longer --slow-rank's compute takes (2: half speed)")
      ->check(CLI::Range(1.0, 1000.0));
  add(app, "--device-ms", o.device_ms,
      "Simulated device compute for benchmarks: after each backward pass every worker waits "
      "this many milliseconds, as if an accelerator computed, without using a core (so that a "
      "benchmark on fewer cores than processes measures waiting, not core sharing)")
      ->check(CLI::Range(0.0, 1e6));
  add(app, "--progress", o.progress,
      "Rank 0's progress on stderr: auto (redrawn in place on a terminal, else a line every "
      "--progress-interval seconds, as under mpirun), always (in place even when stderr is not "
      "a terminal: a terminal behind mpirun) or never")
      ->check(CLI::IsMember({"auto", "always", "never"}));
  add(app, "--progress-interval", o.progress_interval,
      "Seconds between two progress lines when they are not redrawn in place")
      ->check(CLI::Range(0.0, 86400.0));
  add_flag(app, "--quiet", o.quiet, "No progress display: --progress never");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream discard;
    return print ? app.exit(e) : app.exit(e, discard, discard);
  }
  if (o.quiet) o.progress = "never";
  return -1;
}

std::string export_num_servers(int argc, char** argv) {
  const char* flag = "--num-servers";
  const std::size_t flag_length = std::strlen(flag);
  std::string value;
  bool given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == flag && i + 1 < argc) {
      value = argv[i + 1];
      given = true;
    } else if (arg.compare(0, flag_length + 1, std::string(flag) + "=") == 0) {
      value = arg.substr(flag_length + 1);
      given = true;
    }
  }
  if (!given) return "";  // HERD_NUM_SERVERS, if set, is the option's value
  // herd reads DMLC_NUM_SERVER (upstream's name) when HERD_NUM_SERVERS is unset.
  const char* variable = "HERD_NUM_SERVERS";
  const char* current = std::getenv(variable);
  if (current == nullptr || *current == '\0') {
    variable = "DMLC_NUM_SERVER";
    current = std::getenv(variable);
  }
  if (current != nullptr && *current != '\0') {
    // Compared as numbers, so that "1" and "01" agree; a non-number is
    // left to the option's own check.
    char* end = nullptr;
    const long set = std::strtol(current, &end, 10);
    char* flag_end = nullptr;
    const long wanted = std::strtol(value.c_str(), &flag_end, 10);
    if (*end == '\0' && *flag_end == '\0' && set != wanted) {
      return "--num-servers " + value + " contradicts " + variable + "=" + current +
             " in the environment, which herd reads: give one of them, or the same value to "
             "both";
    }
    if (std::string(variable) == "HERD_NUM_SERVERS") return "";
  }
  setenv("HERD_NUM_SERVERS", value.c_str(), 1);
  return "";
}

void finish_train_options(TrainOptions* options, int num_workers, int num_servers) {
  TrainOptions& o = *options;
  const std::string workers =
      std::to_string(num_workers) + " worker" + (num_workers == 1 ? "" : "s");
  if (o.num_servers < 0) o.num_servers = num_servers;
  if (o.num_servers != num_servers) {
    throw herd::Error("--num-servers " + std::to_string(o.num_servers) + ", but herd runs " +
                      std::to_string(num_servers) + " server rank" + (num_servers == 1 ? "" : "s") +
                      " (HERD_NUM_SERVERS)");
  }
  if (o.kvstore.empty()) {
    if (o.communication == "async") {
      o.kvstore = "dist_async";
    } else {
      o.kvstore = num_workers == 1 && num_servers == 0 ? "local" : "horovod";
    }
  }
  const bool async = o.kvstore == "dist_async";
  if (o.communication.empty()) o.communication = async ? "async" : "sync";
  if (o.communication == "async" && !async) {
    throw herd::Error(
        "--communication async needs --kvstore dist_async (parameter servers), but "
        "--kvstore is " +
        o.kvstore + ", which is synchronous");
  }
  if (o.communication == "sync" && async) {
    throw herd::Error(
        "--kvstore dist_async is asynchronous, but --communication is sync: use "
        "--communication async or leave it out");
  }
  if (o.kvstore == "horovod") {
    o.engine = Engine::kAllreduce;
  } else if (o.kvstore == "local" || o.kvstore == "device") {
    o.engine = Engine::kLocalStore;
  } else if (async) {
    o.engine = Engine::kParameterServer;
  } else {
    o.engine = Engine::kReplicas;
  }
  if (o.engine == Engine::kLocalStore && num_workers > 1) {
    throw herd::Error("--kvstore " + o.kvstore + " trains in a single process, but this job has " +
                      workers +
                      ": use --kvstore horovod (the default for more than 1 process), "
                      "dist_sync or dist_async, or run 1 process");
  }
  if (async && num_servers == 0) {
    throw herd::Error(
        "--kvstore dist_async needs parameter-server ranks: pass --num-servers S "
        "and start S more processes (the job's last S ranks serve)");
  }
  if (!async && num_servers > 0) {
    throw herd::Error("--num-servers " + std::to_string(num_servers) +
                      " serves only --kvstore dist_async, but --kvstore is " + o.kvstore +
                      ", which keeps the parameters on the workers: leave --num-servers out");
  }
  if (o.gradient_compression != "none") {
    if (o.engine == Engine::kAllreduce || o.engine == Engine::kLocalStore) {
      throw herd::Error("--gradient-compression " + o.gradient_compression +
                        " compresses what a worker sends to a distributed KVStore, but "
                        "--kvstore is " +
                        o.kvstore + ": use dist_sync, dist_device_sync or dist_async");
    }
    if (o.gradient_compression == "2bit" && !(o.compression_threshold > 0)) {
      std::ostringstream message;
      message << "--gradient-compression 2bit needs --compression-threshold > 0, got "
              << o.compression_threshold;
      throw herd::Error(message.str());
    }
  }
  if (o.data_sharding.empty()) o.data_sharding = o.data.empty() ? "strided" : "parts";
  if (!o.data.empty() && o.data_sharding != "parts") {
    throw herd::Error("--data-sharding " + o.data_sharding + " with --data " + o.data +
                      ": a .rec file is read by parts, each worker its own (num_parts = "
                      "workers, part_index = rank); leave --data-sharding out or use parts");
  }
  if (o.max_test_samples > 0 && !o.val_data.empty()) {
    throw herd::Error("--max-test-samples " + std::to_string(o.max_test_samples) +
                      " limits the IDX test set, but --val-data " + o.val_data +
                      " replaces it; leave one of them out");
  }
  if (o.slow_rank >= num_workers) {
    throw herd::Error("--slow-rank " + std::to_string(o.slow_rank) +
                      " is not a worker: this job has " + workers + " (ranks 0.." +
                      std::to_string(num_workers - 1) + ")");
  }
  if (o.kill_rank >= num_workers) {
    throw herd::Error("--kill-rank " + std::to_string(o.kill_rank) +
                      " is not a worker: this job has " + workers + " (ranks 0.." +
                      std::to_string(num_workers - 1) + ")");
  }
  if (o.commit_every > 0 && o.checkpoint.empty()) {
    throw herd::Error("--commit-every " + std::to_string(o.commit_every) +
                      " needs --checkpoint PATH (the file it writes)");
  }
  if (o.resume && o.checkpoint.empty()) {
    throw herd::Error("--resume needs --checkpoint PATH (the file to resume from)");
  }
  if (async && !o.checkpoint.empty()) {
    throw herd::Error(
        "--checkpoint with --kvstore dist_async: the optimizer state lives on the "
        "parameter servers, which do not save it (as MXNet refuses "
        "save_optimizer_states on dist_async); use dist_sync or horovod to "
        "checkpoint");
  }
}

std::string describe_engine(const TrainOptions& o) {
  switch (o.engine) {
    case Engine::kAllreduce: return "allreduce (DistributedOptimizer)";
    case Engine::kLocalStore: return "a store in this process";
    case Engine::kReplicas: return "replicas over allreduce";
    case Engine::kParameterServer:
      return "parameter servers, " + std::to_string(o.num_servers) + " server" +
             (o.num_servers == 1 ? "" : "s");
  }
  return "";
}

std::string describe_train_options(const TrainOptions& o) {
  std::ostringstream out;
  out << "  kvstore " << o.kvstore << " (" << describe_engine(o) << "), communication "
      << o.communication;
  if (o.gradient_compression != "none") {
    out << ", gradient compression " << o.gradient_compression;
    if (o.gradient_compression == "2bit") out << " (threshold " << o.compression_threshold << ")";
  }
  out << "\n  gradient accumulation " << o.gradient_accumulation << ", data threads "
      << o.data_threads << "\n";
  out << "  optimizer " << o.optimizer;
  if (o.optimizer == "sgd") out << " (momentum " << o.momentum << ")";
  // dist_async applies one worker's batch per update: no scaling.
  const bool scaled = o.scale_lr && o.engine != Engine::kParameterServer;
  out << ", learning rate " << o.learning_rate << (scaled ? " x workers" : "") << ", schedule "
      << o.lr_schedule << ", warm-up " << o.warmup_epochs << " epochs"
      << ", weight decay " << o.weight_decay << "\n";
  out << "  data sharding " << o.data_sharding;
  if (!o.data.empty()) out << ", train " << o.data;
  if (!o.val_data.empty()) out << ", test " << o.val_data;
  out << "\n";
  out << "  batch " << o.batch_size << " per rank, epochs " << o.epochs << ", seed " << o.seed;
  if (o.max_steps_per_epoch > 0) out << ", at most " << o.max_steps_per_epoch << " steps/epoch";
  if (o.max_test_samples > 0) out << ", at most " << o.max_test_samples << " test samples";
  if (!o.checkpoint.empty()) {
    out << ", checkpoint " << o.checkpoint << (o.resume ? " (resume)" : "");
    if (o.commit_every > 0) out << " every " << o.commit_every << " updates";
  }
  out << "\n";
  if (o.device_ms > 0) out << "  simulated device compute " << o.device_ms << " ms per step\n";
  if (o.slow_rank >= 0) {
    out << "  worker " << o.slow_rank << " slowed: its compute takes " << o.slow_factor
        << " x as long\n";
  }
  return out.str();
}

}  // namespace herd_train
