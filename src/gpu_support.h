// GpuSupport and GpuExecutor: what the runtime asks of the GPU path, so that
// no file outside src/gpu/ includes CUDA or NCCL.
//
// CMake compiles src/gpu/ in a build with CUDA, where make_gpu_support returns
// the CUDA implementation, and src/gpu_support_cpu_only.cc without, where it
// returns null and the runtime refuses GPU views. The Runtime owns the one
// GpuSupport of the process; each process set's BackgroundLoop owns one
// GpuExecutor, made when its first GPU response executes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "collectives/transport.h"
#include "common/status.h"
#include "herd/types.h"
#include "src/config.h"
#include "src/fusion_executor.h"
#include "src/message.h"
#include "src/tensor_queue.h"

namespace herd::detail {

// Completes one entry's handle (BackgroundLoop::complete).
using CompleteFn = std::function<void(TensorEntry& entry, const Status& status)>;

// Runs the agreed GPU responses of one process set, on the thread running
// that set's cycles (the background thread or a waiter: cycle_driver.h).
// Work is queued on the GPU and completes later: poll() finishes what is
// done, so the coordinator never blocks on a GPU collective.
class GpuExecutor {
 public:
  virtual ~GpuExecutor() = default;

  // Starts `spec` (any collective; for kAllreduce a fusion group of several
  // entries) on this rank's entries. On success the entries have been moved
  // from (their handles are the executor's to complete); on failure they are
  // untouched and the caller fails them. Every member of the set starts the
  // same responses in the same order, which is what makes the lazily made
  // NCCL communicators agree.
  [[nodiscard]] virtual Status start(const Response& spec, const std::vector<TensorEntry*>& entries,
                                     Contribution contribution) = 0;
  // Completes, through `complete`, every started group whose GPU work has
  // finished. Returns an error when the set cannot go on (an NCCL
  // asynchronous error, a group past HERD_NCCL_TIMEOUT, whose communicator
  // it aborts): the groups in flight have then been failed with it.
  [[nodiscard]] virtual Status poll(const CompleteFn& complete) = 0;
  // Whether anything started is still in flight.
  virtual bool busy() const = 0;
  // Ends the executor's work: waits for what is in flight for up to
  // HERD_NCCL_TIMEOUT (aborting the communicators after that), completing
  // what finished with success and the rest with `reason`.
  virtual void stop(const std::string& reason, const CompleteFn& complete) = 0;
};

// What one process set's executor works with.
struct GpuSetContext {
  const Config* config = nullptr;  // the BackgroundLoop's, set by it
  // The set's members in set order. The executor duplicates it (collectively,
  // at its first GPU response) for NCCL's id exchange and the hierarchical
  // split; the caller keeps it alive as long as the executor.
  MPI_Comm comm = MPI_COMM_NULL;
  // The set's data transport over MPI, for the MPI path and the cross-node
  // step of the hierarchical allreduce; used by the cycle thread only.
  collectives::Transport* host_transport = nullptr;
  std::vector<int> global_ranks;  // for messages
  int set_id = 0;                 // the set's thread in the timeline, set by the BackgroundLoop
};

// The process-wide part: which GPU this rank drives, the checks of GPU views,
// the readiness events recorded on the callers' streams.
class GpuSupport {
 public:
  virtual ~GpuSupport() = default;

  // Checks a view that claims to be on a GPU: the device exists, it is this
  // rank's GPU (the device of its first GPU tensor: one GPU per rank), and
  // the address is memory of that device. Any application thread.
  [[nodiscard]] virtual Status check_view(const std::string& what, const char* role,
                                          const TensorView& view) = 0;
  // Records an event on view.stream, on the calling application thread, that
  // the executor waits for before it reads the view: the work queued on that
  // stream before the submission. The event is released with the pointer.
  [[nodiscard]] virtual Status record_ready(const TensorView& view,
                                            std::shared_ptr<void>* event) = 0;
  // This rank's GPU: the device of its first GPU tensor, or, before any,
  // local_rank modulo the number of devices (a joined rank's stand-ins).
  virtual int rank_device() = 0;

  virtual std::unique_ptr<GpuExecutor> make_executor(const GpuSetContext& context) = 0;
};

// The GPU support of this build, or null in a build without CUDA. Makes no
// CUDA call (a machine without a GPU starts herd as usual).
std::unique_ptr<GpuSupport> make_gpu_support(const Config& config, int rank, int local_rank);

}  // namespace herd::detail
