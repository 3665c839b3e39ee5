// ProcessSetState: everything one process set runs on, on one member rank.
//
// Owned by the Runtime, one per set this rank belongs to (the global set
// included). Owns the set's two communicators (control and data), its
// transport, control channel, tensor queue, background loop and thread, so
// that sets negotiate and move data independently. Created and stopped by the
// application thread that calls init/add_process_set/remove_process_set/
// shutdown; submit() is called by any application thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <mpi.h>

#include "collectives/mpi/host_layout.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/mpi/node_shm.h"
#include "herd/handle.h"
#include "src/background_loop.h"
#include "src/config.h"
#include "src/control_channel.h"
#include "src/gpu_support.h"
#include "src/tensor_queue.h"

namespace herd::detail {

class ProcessSetState {
 public:
  // `comm` holds exactly the set's members, in the order of `ranks` (global
  // ranks, ascending); the state duplicates it and leaves `comm` to the caller.
  // `gpu` (null without GPU support) must outlive the state.
  ProcessSetState(int id, std::vector<int> ranks, MPI_Comm comm, const Config& config,
                  GpuSupport* gpu = nullptr);
  ~ProcessSetState();
  ProcessSetState(const ProcessSetState&) = delete;
  ProcessSetState& operator=(const ProcessSetState&) = delete;

  int id() const { return id_; }
  const std::vector<int>& ranks() const { return ranks_; }
  // This rank's position in the set.
  int set_rank() const { return set_rank_; }
  int set_size() const { return static_cast<int>(ranks_.size()); }

  // Queues the entry (its request already carries set_rank()) and lets its
  // waiters drive the set's loop; wakes the background thread unless inside
  // a BlockingCallScope. Throws herd::Error if the name is pending here or the
  // set has stopped.
  Handle submit(TensorEntry entry);

  // herd::join on this set; see BackgroundLoop::join.
  Handle join(int* last_rank);

  // Stops the set's loop on every member (each member must call it), fails
  // what is pending, joins the thread and frees the communicators.
  void stop();

 private:
  // Maps the set's shared memory when HERD_SHM_ALLREDUCE_BYTES and the
  // machine allow (collective over the set), else an empty path.
  ShmPath make_shm_path(const Config& config);
  // Makes the hierarchical allreduce's communicators, shared memory and
  // transport where the set spans hosts with several of its ranks on each
  // and HERD_HIERARCHICAL_ALLREDUCE allows (collective over the set: every
  // member gets the path or none does), else an empty path. `layout`: the
  // set's data communicator's.
  HierarchicalPath make_hierarchical_path(const Config& config,
                                          const collectives::HostLayout& layout);
  // Maps the hierarchical allreduce's shared memory on this rank's host;
  // true on every member when it could be mapped on every host. Throws on
  // every member, naming the first rank that failed, where
  // HERD_SHM_SINGLE_COPY=on cannot be honoured on some host.
  bool make_host_shm(const Config& config);

  int id_;
  std::vector<int> ranks_;
  int set_rank_ = 0;
  MPI_Comm control_comm_ = MPI_COMM_NULL;
  MPI_Comm data_comm_ = MPI_COMM_NULL;
  std::unique_ptr<collectives::MpiTransport> transport_;
  // Null unless the set's CPU allreduces go through shared memory.
  std::unique_ptr<collectives::NodeShm> node_shm_;
  // The hierarchical allreduce's (all null unless the set has one): this
  // host's members, the members of this rank's local rank on every host (in
  // host order) and their transport, and the shared memory of this host's
  // members. The shared memory and the transport go before the
  // communicators.
  MPI_Comm host_comm_ = MPI_COMM_NULL;
  MPI_Comm cross_comm_ = MPI_COMM_NULL;
  std::unique_ptr<collectives::MpiTransport> cross_transport_;
  std::unique_ptr<collectives::NodeShm> host_shm_;
  std::unique_ptr<ControlChannel> control_;
  TensorQueue queue_;
  // Shared with the handles it completes, which may drive it (cycle_driver.h)
  // and may outlive the set.
  std::shared_ptr<BackgroundLoop> loop_;
  std::thread thread_;
  bool stopped_ = false;
};

}  // namespace herd::detail
