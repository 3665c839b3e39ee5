// Transport: how collectives move bytes between ranks. Nothing else.
//
// The algorithms in collectives/ are written against this interface only, so
// each one runs unchanged over MPI point-to-point (collectives/mpi) and over
// an in-process fabric where threads play ranks (collectives/inproc, used by
// the unit tests). They move host memory: GPU tensors reach them as pinned
// host copies (the MPI path of GPU collectives, the cross-node step of the
// hierarchical allreduce), while NCCL's own collectives on device memory
// (collectives/nccl) do not go through a Transport. A Transport is used by
// one thread at a time: in herd, whichever thread runs its process set's
// cycles.
#pragma once

#include <cstddef>
#include <memory>

#include "common/status.h"

namespace herd::collectives {

// One posted send or receive. wait() blocks until it is done; the buffer given
// to isend/irecv must stay valid and untouched until then. Destroying a
// transfer that was never waited on waits for it (and drops its Status).
class PendingTransfer {
 public:
  virtual ~PendingTransfer() = default;
  [[nodiscard]] virtual Status wait() = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Posts a send of `bytes` bytes to `peer`. Messages between one pair of
  // ranks with one tag arrive in the order they were posted. A zero-byte
  // message is legal and is delivered.
  virtual std::unique_ptr<PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                                 int tag) = 0;
  // Posts a receive of exactly `bytes` bytes from `peer`; a message of another
  // length makes wait() fail with both lengths in the message.
  virtual std::unique_ptr<PendingTransfer> irecv(void* data, std::size_t bytes, int peer,
                                                 int tag) = 0;
};

}  // namespace herd::collectives
