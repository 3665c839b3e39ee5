// Peer identity: which process a rank is, for messages about peers.
//
// herd::init gathers every rank's host name and pid once (one MPI_Allgather
// over MPI_COMM_WORLD); every failure message about a peer (dead, frozen,
// timed out, cut off) then names it as "rank N (host H, pid P)", N being the
// rank in MPI_COMM_WORLD, so that the process can be found and inspected.
// Process-wide; safe to read from any thread once recorded.
#pragma once

#include <chrono>
#include <string>

#include <mpi.h>

namespace herd::collectives {

// Gathers every rank's host name and pid; collective over `world` (which
// must be MPI_COMM_WORLD or a duplicate of it). Throws herd::Error when MPI
// fails.
void record_peer_identities(MPI_Comm world);

// "rank 3 (host node7, pid 4242)"; just "rank 3" before the identities are
// recorded or for a rank outside the job.
std::string describe_rank(int world_rank);

// The same for rank `rank` of `comm` (translated to its world rank; where
// that fails, the rank of `comm` is named as "rank R of the communicator").
std::string describe_peer(MPI_Comm comm, int rank);

// This process, as describe_rank() names it.
std::string describe_self();

// Whether rank `rank` of `comm` runs on this machine (MPI_COMM_TYPE_SHARED)
// and its process no longer exists: a waiter need not wait for the timeout
// to know that such a peer will never answer. False when unknown.
bool peer_process_gone(MPI_Comm comm, int rank);
// How often a sleeping wait asks peer_process_gone (a system call or two).
constexpr std::chrono::milliseconds kPeerLivenessInterval{100};

}  // namespace herd::collectives
