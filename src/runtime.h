// Runtime: everything one herd process owns between init and shutdown.
//
// Created by herd::init on the calling thread; owns, once each, the MPI
// communicators, the data transport, the control channel, the tensor queue,
// the background loop and its thread, and hands narrow references to them to
// the pieces that need them. Submission methods are called by any number of
// application threads at once; shutdown by one.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include <mpi.h>

#include "collectives/mpi/mpi_transport.h"
#include "herd/handle.h"
#include "herd/types.h"
#include "src/background_loop.h"
#include "src/config.h"
#include "src/control_channel.h"
#include "src/tensor_queue.h"

namespace herd::detail {

class Runtime {
 public:
  // Initializes MPI unless the program already did (then it must have asked
  // for MPI_THREAD_MULTIPLE), duplicates the world communicator for control
  // and for data, and starts the background thread. Throws herd::Error.
  static std::unique_ptr<Runtime> start(const Config& config);

  // Stops the thread (failing what is pending), frees the communicators and
  // finalizes MPI if herd initialized it. Idempotent.
  void shutdown();
  ~Runtime();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }

  // Checks the views and queues the operation; throws herd::Error when the
  // request is malformed or the name is still pending on this rank.
  Handle allreduce_async(const std::string& name, const TensorView& input, const TensorView& output,
                         ReduceOp op, double prescale, double postscale);

 private:
  Runtime() = default;

  Config config_;
  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  MPI_Comm control_comm_ = MPI_COMM_NULL;
  MPI_Comm data_comm_ = MPI_COMM_NULL;
  std::unique_ptr<collectives::MpiTransport> transport_;
  std::unique_ptr<ControlChannel> control_;
  TensorQueue queue_;
  std::unique_ptr<BackgroundLoop> loop_;
  std::thread thread_;
  bool stopped_ = false;
};

// Checks one allreduce submission: a name, matching dtype and element count
// of input and output, no negative extents, data present when there are
// elements, input and output either the same buffer or disjoint, finite
// scales, CPU memory. The message names the tensor and the values involved.
[[nodiscard]] Status validate_allreduce(const std::string& name, const TensorView& input,
                                        const TensorView& output, double prescale,
                                        double postscale);

}  // namespace herd::detail
