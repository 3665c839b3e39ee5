// MPI helpers shared by herd-bench's sweeps: a duplicated communicator, MPI's
// names for herd's dtypes and ops, and the timing loop every path runs in.
// herd-bench checks its MPI calls with HERD_MPI_CHECK (mpi_check.h), which
// throws herd::Error naming the call, file and line.
//
// Called by the benchmark's main thread on every rank; MPI is initialized with
// MPI_THREAD_MULTIPLE (herd's background thread uses MPI meanwhile).
#pragma once

#include <mpi.h>

#include "collectives/mpi/mpi_check.h"
#include "herd/types.h"

namespace herd::bench {

// An MPI_Comm_dup of a communicator, freed on destruction: each path that
// talks MPI itself gets its own, so its tags never meet herd's or another's.
class DupComm {
 public:
  explicit DupComm(MPI_Comm comm) { HERD_MPI_CHECK(MPI_Comm_dup(comm, &comm_)); }
  ~DupComm() { HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&comm_)); }
  DupComm(const DupComm&) = delete;
  DupComm& operator=(const DupComm&) = delete;
  MPI_Comm get() const { return comm_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
};

// MPI's type for `dtype`, or MPI_DATATYPE_NULL where MPI has none (16-bit floats).
MPI_Datatype mpi_type(DataType dtype);

// MPI's op for `op`; kAverage maps to MPI_SUM (the caller divides afterwards).
MPI_Op mpi_op(ReduceOp op);

// Runs `once` `warmup` times, then, after a barrier, `iterations` times, and
// returns on rank 0 the slowest rank's mean seconds per timed iteration (0 on
// the other ranks).
template <typename Fn>
double time_path(Fn&& once, int warmup, int iterations, MPI_Comm comm) {
  for (int i = 0; i < warmup; ++i) once();
  HERD_MPI_CHECK(MPI_Barrier(comm));
  const double start = MPI_Wtime();
  for (int i = 0; i < iterations; ++i) once();
  const double mean = (MPI_Wtime() - start) / iterations;
  double slowest = 0;
  HERD_MPI_CHECK(MPI_Reduce(&mean, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, comm));
  return slowest;
}

}  // namespace herd::bench
