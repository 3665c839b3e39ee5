// The shared-memory allreduce group of a communicator whose ranks all run on
// this machine (collectives/shm/shm_allreduce.h): maps one POSIX shared
// memory object into every member and owns the mapping.
//
// Called once per process set, by every member, on the thread that calls
// herd::init or add_process_set; collective over the communicator. The object
// is unlinked as soon as every member has mapped it, so nothing is left in
// /dev/shm however the job ends.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>

#include <mpi.h>

#include "collectives/shm/shm_allreduce.h"

namespace herd::collectives {

class NodeShm {
 public:
  NodeShm(void* mapping, std::size_t bytes, int rank, int ranks, std::size_t slot_bytes,
          std::chrono::milliseconds stall_timeout, std::optional<ShmLineMode> fixed_mode);
  ~NodeShm();
  NodeShm(const NodeShm&) = delete;
  NodeShm& operator=(const NodeShm&) = delete;

  ShmAllreduceGroup& group() { return group_; }

 private:
  void* mapping_;
  std::size_t bytes_;
  ShmAllreduceGroup group_;
};

struct NodeShmOptions {
  std::size_t slot_bytes = kDefaultShmSlotBytes;
  // A wait in which a peer's counter has not moved for this long fails
  // (herd passes HERD_COLLECTIVE_TIMEOUT); 0: wait for ever.
  std::chrono::milliseconds stall_timeout{0};
  // Tests and benchmarks pin a line mode; by default rank 0 chooses it from
  // the times of earlier calls (collectives/shm/line_mode.h).
  std::optional<ShmLineMode> fixed_mode;
  // The single-copy path (shm_allreduce.h, HERD_SHM_SINGLE_COPY): kAuto
  // where every rank can read every other rank's memory, kOn the same but
  // an error where some rank cannot, kOff never. Every rank uses it or none.
  enum class SingleCopy { kAuto, kOn, kOff };
  SingleCopy single_copy = SingleCopy::kAuto;
  // Calls of min bytes up to (not including) end bytes take it.
  std::size_t single_copy_min_bytes = kShmSingleCopyMinBytes;
  std::size_t single_copy_end_bytes = kShmSingleCopyEndBytes;
  // Tests: how the probe and the calls read the other processes' memory
  // (null: process_vm_readv).
  CrossMemoryRead cross_memory_read = nullptr;
};

// Every member gets a group, or every member gets null and *why_not says why
// (one rank, ranks on several machines, or the shared memory could not be
// made or mapped on some rank, with the call and its error). Collective over
// `comm`. With SingleCopy::kOn, throws herd::Error on every rank, naming the
// rank and the error, when some rank cannot read another's memory. The group names its peers by
// their world ranks (peer_identity.h) and exchanges fault notices (fault_notice.h).
std::unique_ptr<NodeShm> make_node_shm(MPI_Comm comm, const NodeShmOptions& options,
                                       std::string* why_not);

}  // namespace herd::collectives
