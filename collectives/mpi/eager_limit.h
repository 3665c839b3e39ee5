// The eager piece size of an MpiTransport (mpi_transport.h): how many bytes
// one MPI message may carry and still go eagerly, without a rendezvous.
//
// Called once per communicator, by every member, when the runtime makes a
// process set's transport (on the thread calling herd::init or
// add_process_set). Reads Open MPI's shared-memory eager limit through the
// MPI tool interface (MPI_T control variables), so an MCA setting such as
// `--mca btl_vader_eager_limit 8192` is followed.
#pragma once

#include <cstddef>
#include <cstdint>

#include <mpi.h>

namespace herd::collectives {

// Bytes of an eager message that the MPI library's own header takes: Open MPI
// 4.1's shared-memory transport sends 4040 payload bytes eagerly under its
// 4096-byte limit and 4048 not; the allowance leaves room for other versions.
constexpr std::size_t kEagerHeaderAllowance = 128;

// Open MPI's shared-memory eager limit on this rank (btl_vader_eager_limit,
// btl_sm_eager_limit in Open MPI 5), or 0 when the library has none. Read at
// the first call (Open MPI's MPI_T start-up takes about 0.2 s) and kept.
std::size_t shared_memory_eager_limit();

// The eager piece size every member of `comm` uses, the same on all of them
// (the smallest of the members' own values, so that sender and receiver
// always cut a message alike). A member's own value: `configured` when it is
// >= 0; otherwise (auto) the shared-memory eager limit less
// kEagerHeaderAllowance when all of `comm` is on this machine, and 0 (no
// eager pieces) when `comm` spans machines, whose network transports have
// eager limits of their own. Collective over `comm`.
std::size_t agree_eager_piece_bytes(MPI_Comm comm, int64_t configured);

}  // namespace herd::collectives
