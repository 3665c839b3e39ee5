#include "herd_train/train_options.h"

#include <cctype>
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
      "How gradients are combined: local (1 process) or dist_sync (allreduce of every gradient "
      "across the ranks, synchronous). Default: local for 1 process, dist_sync for more")
      ->check(CLI::IsMember({"local", "dist_sync"}))
      ->default_str("local|dist_sync");
  add(app, "--learning-rate,--lr", o.learning_rate, "Base learning rate")
      ->check(CLI::NonNegativeNumber);
  add(app, "--batch-size", o.batch_size, "Samples per step on each rank")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  add(app, "--communication", o.communication,
      "sync (every rank applies the same averaged gradient each step) or async (not "
      "implemented: comes with the parameter-server work)")
      ->check(CLI::IsMember({"sync", "async"}));
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
           "Every rank loads --checkpoint and training continues from the next epoch");
  add(app, "--max-steps-per-epoch", o.max_steps_per_epoch,
      "Stop each epoch after this many steps (0: the whole training set), for tests")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  add_flag(app, "--print-checksum", o.print_checksum,
           "At the end, rank 0 prints 'checksum: <hex>' (FNV-1a over all parameter bytes)");
  add_flag(app, "--quiet", o.quiet, "No progress bar");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::ostringstream discard;
    return print ? app.exit(e) : app.exit(e, discard, discard);
  }
  return -1;
}

void finish_train_options(TrainOptions* options, int num_processes) {
  TrainOptions& o = *options;
  if (o.communication == "async") {
    throw herd::Error(
        "--communication async is not implemented: asynchronous updates come with the "
        "parameter-server work; use --communication sync (the default)");
  }
  if (o.kvstore.empty()) o.kvstore = num_processes == 1 ? "local" : "dist_sync";
  if (o.kvstore == "local" && num_processes > 1) {
    throw herd::Error("--kvstore local trains in a single process, but this job has " +
                      std::to_string(num_processes) +
                      " processes: use --kvstore dist_sync (the default for more than 1 "
                      "process) or run 1 process");
  }
  if (o.resume && o.checkpoint.empty()) {
    throw herd::Error("--resume needs --checkpoint PATH (the file to resume from)");
  }
}

std::string describe_train_options(const TrainOptions& o) {
  std::ostringstream out;
  out << "  kvstore " << o.kvstore << ", communication " << o.communication
      << ", gradient accumulation " << o.gradient_accumulation << ", data threads "
      << o.data_threads << "\n";
  out << "  optimizer " << o.optimizer;
  if (o.optimizer == "sgd") out << " (momentum " << o.momentum << ")";
  out << ", learning rate " << o.learning_rate << (o.scale_lr ? " x ranks" : "") << ", schedule "
      << o.lr_schedule << ", warm-up " << o.warmup_epochs << " epochs"
      << ", weight decay " << o.weight_decay << "\n";
  out << "  batch " << o.batch_size << " per rank, epochs " << o.epochs << ", seed " << o.seed;
  if (o.max_steps_per_epoch > 0) out << ", at most " << o.max_steps_per_epoch << " steps/epoch";
  if (!o.checkpoint.empty())
    out << ", checkpoint " << o.checkpoint << (o.resume ? " (resume)" : "");
  out << "\n";
  return out.str();
}

}  // namespace herd_train
