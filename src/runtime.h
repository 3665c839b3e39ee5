// Runtime: everything one herd process owns between init and shutdown.
//
// Created by herd::init on the calling thread. Owns MPI (when herd started
// it), a registry communicator for process-set management, and one
// ProcessSetState per process set this rank belongs to (the global set
// included), each with its own communicators, queue and background thread.
// Submission methods are called by any number of application threads at once;
// start, add/remove_process_set and shutdown by one thread, while no
// submission runs (src/api.cc's lock sees to that).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <mpi.h>

#include "herd/handle.h"
#include "herd/parameter_server.h"
#include "herd/process_set.h"
#include "herd/tensor.h"
#include "herd/types.h"
#include "src/config.h"
#include "src/gpu_support.h"
#include "src/message.h"
#include "src/process_set_state.h"
#include "src/ps_link.h"
#include "src/tensor_queue.h"

namespace herd::detail {

class Runtime {
 public:
  // Initializes MPI unless the program already did (then it must have asked
  // for MPI_THREAD_MULTIPLE), logs `config_warnings` (once per process) and
  // `config_choices` (at level info), fails on every rank when `config_read`
  // (the result of read_config) is an error on any rank, checks that the
  // ranks' settings agree, starts the global set and the sets of
  // HERD_PROCESS_SETS. Throws herd::Error.
  static std::unique_ptr<Runtime> start(const Config& config, const Status& config_read,
                                        const std::vector<std::string>& config_warnings,
                                        const std::vector<std::string>& config_choices);

  // How shutdown() was reached: herd::shutdown, or the end of the process
  // without it (the static destructor of src/api.cc, or a failed start).
  enum class ShutdownCause {
    kCall,
    kExit,
  };

  // Stops every set's thread (failing what is pending), frees the
  // communicators and finalizes MPI if herd initialized it. Idempotent.
  // After a fatal failure (fault_notice.h) MPI is not finalized, so that no
  // rank blocks in MPI_Finalize for a peer that is gone or frozen: the
  // process ends without it (docs/errors.md, "Ending after a fatal
  // failure"). A process that ends without herd::shutdown first tells the
  // other ranks so, which name it in what fails on them.
  void shutdown(ShutdownCause cause = ShutdownCause::kCall);
  // herd::fail: records `reason` as this process's fault and sends it to
  // every other rank (fault_notice.h), whose waits then fail with it, then
  // shuts down as after any fault (MPI not finalized). A fault known before
  // wins, as everywhere: it is the one the others see.
  void fail(const std::string& reason);
  ~Runtime();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int cross_rank() const { return cross_rank_; }
  int cross_size() const { return cross_size_; }
  bool is_homogeneous() const { return homogeneous_; }
  bool mpi_threads_supported() const { return thread_level_ == MPI_THREAD_MULTIPLE; }

  // The job's roles (HERD_NUM_SERVERS). On a server rank, start() returns a
  // runtime that only serves: the caller then calls serve_and_exit().
  bool is_server() const { return is_server_; }
  const ps::Layout& layout() const { return layout_; }
  // The link to the servers, on a worker of a job with servers; else null.
  WorkerLink* worker_link() { return link_.get(); }
  // On a server rank: runs the server loop with the registered handler until
  // every worker has finished, shuts down and ends the process, with status
  // 0, or 1 after a fatal failure.
  [[noreturn]] void serve_and_exit();

  // Collective over every rank of the job, called in the same order
  // everywhere; see include/herd/herd.h.
  ProcessSet add_process_set(std::vector<int> ranks);
  void remove_process_set(const ProcessSet& set);
  ProcessSet global_process_set() const;
  // Every set of the job, the global set first, then by id.
  std::vector<ProcessSet> process_sets() const;

  // Each checks its arguments and queues the operation on the set's thread;
  // throws herd::Error when the request is malformed, this rank is not in the
  // set, or the name is still pending on this rank.
  Handle allreduce_async(const std::string& name, const TensorView& input, const TensorView& output,
                         ReduceOp op, double prescale, double postscale, const ProcessSet& set);
  Handle allgather_async(const std::string& name, const TensorView& input, Tensor* output,
                         const ProcessSet& set);
  Handle broadcast_async(const std::string& name, const TensorView& inout, int root,
                         const ProcessSet& set);
  Handle alltoall_async(const std::string& name, const TensorView& input,
                        std::vector<int64_t> splits, Tensor* output,
                        std::vector<int64_t>* received_splits, const ProcessSet& set);
  Handle reducescatter_async(const std::string& name, const TensorView& input, Tensor* output,
                             ReduceOp op, double prescale, double postscale, const ProcessSet& set);
  Handle grouped_allreduce_async(const std::vector<std::string>& names,
                                 const std::vector<TensorView>& inputs,
                                 const std::vector<TensorView>& outputs, ReduceOp op,
                                 double prescale, double postscale, const ProcessSet& set);
  // Submits this rank's next barrier of the set; barriers match in call order.
  Handle barrier_async(const ProcessSet& set);
  // Starts this rank's herd::join on the global set; once the handle
  // completes, *last_rank holds the rank that joined last.
  Handle join_async(int* last_rank);

  // herd::start_timeline and herd::stop_timeline on this rank: the process's
  // timeline (timeline.h). Throws herd::Error when the file cannot be opened.
  void start_timeline(const std::string& path, bool mark_cycles);
  void stop_timeline();

 private:
  Runtime() = default;
  // The state of `set` on this rank; throws when this rank is not a member
  // or the set does not exist. `what` opens the message.
  ProcessSetState& member_state(const ProcessSet& set, const std::string& what);
  // A request for `name` of `type` with this rank's position in the set and
  // the view's dtype, shape and device.
  TensorEntry make_entry(CollectiveType type, const std::string& name, const TensorView& view,
                         const ProcessSetState& state);
  // Throws unless `view` is CPU memory or memory of this rank's GPU in a
  // build with GPU support (GpuSupport::check_view).
  void require_usable_device(const std::string& what, const char* role, const TensorView& view);
  // Makes the set's communicator and, on members, its state.
  ProcessSet create_process_set(int id, std::vector<int> ranks);

  Config config_;
  bool owns_mpi_ = false;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  // Among the ranks of the same local_rank_ (MPI_Comm_split by local rank).
  int cross_rank_ = 0;
  int cross_size_ = 1;
  bool homogeneous_ = true;
  int thread_level_ = MPI_THREAD_SINGLE;  // as MPI provides it
  // Used only by the thread that adds and removes process sets.
  MPI_Comm registry_comm_ = MPI_COMM_NULL;
  // The GPU path (null without it); declared before the sets, which use it,
  // so that it is destroyed after them.
  std::unique_ptr<GpuSupport> gpu_support_;
  std::map<int, std::vector<int>> set_ranks_;                    // every set of the job, by id
  std::map<int, std::unique_ptr<ProcessSetState>> member_sets_;  // the sets this rank is in
  int next_set_id_ = 1;
  bool started_ = false;  // start() completed
  ps::Layout layout_;
  bool is_server_ = false;
  // With servers: the communicator of this rank's role (the workers', the
  // global set's, or the servers'), and a server's link to the workers.
  MPI_Comm role_comm_ = MPI_COMM_NULL;
  MPI_Comm server_comm_ = MPI_COMM_NULL;
  std::unique_ptr<WorkerLink> link_;
  bool stopped_ = false;
};

// `message` (a failed operation's) with "herd::shutdown on some rank" made
// precise where a fault is known, such as the one a rank that called
// herd::fail sent before it shut down ("... (herd::shutdown after a fatal
// failure: rank 1 (host h, pid p): <reason>) ..."), or where a peer has said
// that it exited without herd::shutdown (fault_notice.h): "... (rank 1 (host
// h, pid p) exited without herd::shutdown) ...". Waits briefly for the
// notice, which travels apart from the shutdown itself. On a set other than
// the global one, "(or herd shut down)" gets the fault the same way.
std::string name_the_rank_that_stopped(const std::string& message);

}  // namespace herd::detail
