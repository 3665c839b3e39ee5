// Which ranks of a communicator share a machine (a host): the layout every
// host-aware choice reads (the hierarchical allreduce, the transport's
// segment sizes, herd::local_rank and friends).
//
// Hosts are told apart as MPI tells them (MPI_Comm_split_type with
// MPI_COMM_TYPE_SHARED): ranks whose processes can share memory are on one
// host. Emulated hosts (network namespaces of one machine, each with its own
// Open MPI daemon) count as separate hosts, as on a real cluster.
//
// Called once per communicator on the thread that makes it; collective over
// the communicator.
#pragma once

#include <vector>

#include <mpi.h>

namespace herd::collectives {

struct HostLayout {
  // Host index of each rank of the communicator: hosts are numbered 0, 1, ...
  // in the order of their lowest rank.
  std::vector<int> host_of;
  int hosts = 1;
  // This rank's host, its position among that host's ranks (in rank order)
  // and how many ranks that host has.
  int host = 0;
  int local_rank = 0;
  int local_size = 1;
  // Every host has the same number of ranks.
  bool uniform = true;
  // Each host's ranks are consecutive in the communicator (Open MPI's
  // default placement, --map-by slot), host h holding ranks
  // h * local_size .. (h + 1) * local_size - 1 when also uniform.
  bool contiguous = true;

  bool spans_hosts() const { return hosts > 1; }
};

// The layout of `comm`; the same on every rank but for the this-rank fields.
// Throws herd::Error when MPI fails.
HostLayout host_layout(MPI_Comm comm);

// The layout of ranks whose host indices are `host_of` (numbered as above),
// seen from rank `rank`: the pure part of host_layout, for tests.
HostLayout host_layout_of(const std::vector<int>& host_of, int rank);

}  // namespace herd::collectives
