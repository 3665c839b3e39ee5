// herd-train: herd's training job. Trains a multilayer perceptron on
// Fashion-MNIST data-parallel over MPI, through herd::DistributedOptimizer
// (--kvstore horovod) or a herd KVStore (local, dist_sync, dist_async with
// parameter-server ranks), and prints per-epoch loss, test accuracy and
// samples/s from rank 0.
//
//   mpirun -np 2 build/examples/herd_train/herd-train --epochs 3
//   mpirun -np 3 build/examples/herd_train/herd-train --kvstore dist_async --num-servers 1
//   mpirun -np 2 build/examples/herd_train/herd-train --data train.rec --val-data test.rec
//   build/examples/herd_train/herd-train --help
//
// With --num-servers S (HERD_NUM_SERVERS) the job's last S ranks are
// parameter servers: herd::init serves on them and never returns, so only
// the workers run what follows it.
//
// Exit codes: 0 done, 1 an error (a bad checkpoint, bad data, a failed
// collective; a bad record found mid-epoch ends every rank through
// herd::fail), 2 bad options, 77 the dataset is missing (install the Debian
// package dataset-fashion-mnist or pass --data-dir).
#include <cstdio>
#include <exception>

#include "herd/herd.h"
#include "herd/parameter_server.h"
#include "herd_train/train_options.h"
#include "herd_train/training_loop.h"

int main(int argc, char** argv) {
  herd_train::TrainOptions options;
  int code = 0;
  // Before herd::init, which reads HERD_NUM_SERVERS; a contradiction is
  // reported once every rank knows its role.
  const std::string num_servers_conflict = herd_train::export_num_servers(argc, argv);
  try {
    herd::init();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd-train: herd::init failed: %s\n", e.what());
    return 1;
  }
  const int rank = herd::rank();
  code = herd_train::parse_train_options(argc, argv, rank == 0, &options);
  if (code < 0 && !num_servers_conflict.empty()) {
    if (rank == 0) std::fprintf(stderr, "herd-train: %s\n", num_servers_conflict.c_str());
    code = 2;
  }
  if (code < 0) {
    try {
      herd_train::finish_train_options(&options, herd::size(), herd::ps::layout().num_servers);
    } catch (const std::exception& e) {
      // Every rank reaches the same verdict; rank 0 says why.
      if (rank == 0) std::fprintf(stderr, "herd-train: %s\n", e.what());
      code = 2;
    }
  }
  if (code < 0) {
    try {
      code = herd_train::run_training(options);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "herd-train: rank %d: %s\n", rank, e.what());
      code = 1;
    }
  }
  try {
    // A rank whose data failed mid-epoch has ended the job with herd::fail,
    // which shut herd down here.
    if (herd::is_initialized()) herd::shutdown();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "herd-train: rank %d: herd::shutdown failed: %s\n", rank, e.what());
    if (code == 0) code = 1;
  }
  return code;
}
