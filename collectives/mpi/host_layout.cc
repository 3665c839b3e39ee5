#include "collectives/mpi/host_layout.h"

#include <algorithm>

#include "collectives/mpi/mpi_check.h"

namespace herd::collectives {

HostLayout host_layout_of(const std::vector<int>& host_of, int rank) {
  HostLayout layout;
  layout.host_of = host_of;
  layout.hosts = host_of.empty() ? 1 : *std::max_element(host_of.begin(), host_of.end()) + 1;
  layout.host = host_of.empty() ? 0 : host_of[static_cast<std::size_t>(rank)];
  std::vector<int> ranks_on(static_cast<std::size_t>(layout.hosts), 0);
  for (std::size_t r = 0; r < host_of.size(); ++r) {
    if (static_cast<int>(r) == rank)
      layout.local_rank = ranks_on[static_cast<std::size_t>(host_of[r])];
    ++ranks_on[static_cast<std::size_t>(host_of[r])];
  }
  layout.local_size = ranks_on[static_cast<std::size_t>(layout.host)];
  layout.uniform =
      std::all_of(ranks_on.begin(), ranks_on.end(), [&](int n) { return n == ranks_on.front(); });
  for (std::size_t r = 1; r < host_of.size(); ++r) {
    // Contiguous: the host index never goes back to an earlier one.
    if (host_of[r] != host_of[r - 1] && host_of[r] != host_of[r - 1] + 1) layout.contiguous = false;
  }
  return layout;
}

HostLayout host_layout(MPI_Comm comm) {
  int rank = 0;
  int size = 1;
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HERD_MPI_CHECK(MPI_Comm_size(comm, &size));
  MPI_Comm local = MPI_COMM_NULL;
  HERD_MPI_CHECK(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local));
  // A host is named by its lowest rank; renumbered in that order below.
  int leader = rank;
  HERD_MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, &leader, 1, MPI_INT, MPI_MIN, local));
  HERD_MPI_CHECK(MPI_Comm_free(&local));
  std::vector<int> leaders(static_cast<std::size_t>(size));
  HERD_MPI_CHECK(MPI_Allgather(&leader, 1, MPI_INT, leaders.data(), 1, MPI_INT, comm));
  std::vector<int> host_of(leaders.size());
  std::vector<int> seen;
  for (std::size_t r = 0; r < leaders.size(); ++r) {
    auto at = std::find(seen.begin(), seen.end(), leaders[r]);
    if (at == seen.end()) at = seen.insert(seen.end(), leaders[r]);
    host_of[r] = static_cast<int>(at - seen.begin());
  }
  return host_layout_of(host_of, rank);
}

}  // namespace herd::collectives
