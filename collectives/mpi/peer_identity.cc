#include "collectives/mpi/peer_identity.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include <fmt/format.h>

#include "collectives/mpi/mpi_check.h"

namespace herd::collectives {
namespace {

// Longest host name kept; longer ones are cut (they only label messages).
constexpr std::size_t kHostBytes = 64;

struct Identity {
  std::array<char, kHostBytes> host{};
  int64_t pid = 0;
  int64_t node = 0;  // the lowest world rank on the rank's machine
};

// Never destroyed: herd's runtime may be shut down from a static destructor
// (src/api.cc), which may run after this file's would have.
struct Table {
  std::mutex mutex;
  std::vector<Identity> identities;  // by world rank
  int world_rank = -1;
};
Table& table() {
  static Table* const instance = new Table;
  return *instance;
}

}  // namespace

void record_peer_identities(MPI_Comm world) {
  Identity mine;
  if (gethostname(mine.host.data(), mine.host.size() - 1) != 0) {
    std::strncpy(mine.host.data(), "unknown", mine.host.size() - 1);
  }
  mine.host.back() = '\0';
  mine.pid = static_cast<int64_t>(getpid());
  int rank = 0;
  int size = 0;
  HERD_MPI_CHECK(MPI_Comm_rank(world, &rank));
  HERD_MPI_CHECK(MPI_Comm_size(world, &size));
  MPI_Comm node = MPI_COMM_NULL;
  HERD_MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
  int lowest = rank;
  const Status reduced = HERD_MPI_STATUS(MPI_Allreduce(&rank, &lowest, 1, MPI_INT, MPI_MIN, node));
  const Status freed = HERD_MPI_STATUS(MPI_Comm_free(&node));
  ::herd::detail::throw_if_failed(reduced);
  ::herd::detail::throw_if_failed(freed);
  mine.node = lowest;
  std::vector<Identity> all(static_cast<std::size_t>(size));
  HERD_MPI_CHECK(MPI_Allgather(&mine, sizeof(Identity), MPI_BYTE, all.data(), sizeof(Identity),
                               MPI_BYTE, world));
  std::lock_guard<std::mutex> lock(table().mutex);
  table().identities = std::move(all);
  table().world_rank = rank;
}

std::string describe_rank(int world_rank) {
  std::lock_guard<std::mutex> lock(table().mutex);
  if (world_rank < 0 || static_cast<std::size_t>(world_rank) >= table().identities.size()) {
    return fmt::format("rank {}", world_rank);
  }
  const Identity& identity = table().identities[static_cast<std::size_t>(world_rank)];
  return fmt::format("rank {} (host {}, pid {})", world_rank, identity.host.data(), identity.pid);
}

namespace {

int world_rank_of(MPI_Comm comm, int rank) {
  MPI_Group group = MPI_GROUP_NULL;
  MPI_Group world_group = MPI_GROUP_NULL;
  int world_rank = MPI_UNDEFINED;
  const bool translated =
      MPI_Comm_group(comm, &group) == MPI_SUCCESS &&
      MPI_Comm_group(MPI_COMM_WORLD, &world_group) == MPI_SUCCESS &&
      MPI_Group_translate_ranks(group, 1, &rank, world_group, &world_rank) == MPI_SUCCESS;
  if (group != MPI_GROUP_NULL) MPI_Group_free(&group);
  if (world_group != MPI_GROUP_NULL) MPI_Group_free(&world_group);
  return translated && world_rank != MPI_UNDEFINED ? world_rank : -1;
}

}  // namespace

std::string describe_peer(MPI_Comm comm, int rank) {
  const int world_rank = world_rank_of(comm, rank);
  return world_rank >= 0 ? describe_rank(world_rank)
                         : fmt::format("rank {} of the communicator", rank);
}

bool peer_process_gone(MPI_Comm comm, int rank) {
  const int world_rank = world_rank_of(comm, rank);
  int64_t pid = 0;
  {
    std::lock_guard<std::mutex> lock(table().mutex);
    if (world_rank < 0 || table().world_rank < 0 ||
        static_cast<std::size_t>(world_rank) >= table().identities.size()) {
      return false;
    }
    const Identity& peer = table().identities[static_cast<std::size_t>(world_rank)];
    if (peer.node != table().identities[static_cast<std::size_t>(table().world_rank)].node)
      return false;
    pid = peer.pid;
  }
  return pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

std::string describe_self() {
  int rank = -1;
  {
    std::lock_guard<std::mutex> lock(table().mutex);
    rank = table().world_rank;
  }
  if (rank < 0) return fmt::format("pid {}", getpid());
  return describe_rank(rank);
}

}  // namespace herd::collectives
