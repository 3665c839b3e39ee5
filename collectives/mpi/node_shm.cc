#include "collectives/mpi/node_shm.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include "collectives/mpi/fault_notice.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_transport.h"
#include "collectives/mpi/peer_identity.h"

namespace herd::collectives {
namespace {

// Longest shared memory object name sent from rank 0 to the others.
constexpr std::size_t kNameBytes = 96;

std::string system_error(const char* call, const std::string& what) {
  return fmt::format("{}({}): {}", call, what, std::strerror(errno));
}

// A name no other group, in this job or another, uses at the same time.
std::string unique_name() {
  static std::atomic<int> groups_made{0};
  const auto ticks = std::chrono::steady_clock::now().time_since_epoch().count();
  return fmt::format("/herd-{}-{}-{:x}", getpid(), groups_made.fetch_add(1), ticks);
}

// Maps `bytes` of the object `name`, creating it (exclusively) or opening an
// existing one. Returns null and sets *error on failure.
void* map_object(const std::string& name, std::size_t bytes, bool create, std::string* error) {
  const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name.c_str(), O_RDWR, 0600);
  if (fd < 0) {
    *error = system_error("shm_open", name);
    return nullptr;
  }
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    *error = system_error("ftruncate", fmt::format("{}, {} bytes", name, bytes));
    close(fd);
    return nullptr;
  }
  void* mapping = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (mapping == MAP_FAILED) {
    *error = system_error("mmap", fmt::format("{}, {} bytes", name, bytes));
    return nullptr;
  }
  return mapping;
}

std::vector<void*> rank_regions(void* mapping, int ranks, std::size_t slot_bytes) {
  std::vector<void*> regions;
  for (int j = 0; j < ranks; ++j) {
    regions.push_back(static_cast<uint8_t*>(mapping) +
                      static_cast<std::size_t>(j) * shm_region_bytes(slot_bytes));
  }
  return regions;
}

// Gives the group the single-copy path where every rank can read every
// other's memory and none turned it off; throws where some rank requires it
// and some rank cannot. The same outcome on every rank.
void agree_on_single_copy(MPI_Comm comm, int rank, int ranks, const NodeShmOptions& options,
                          ShmAllreduceGroup& group) {
  using SingleCopy = NodeShmOptions::SingleCopy;
  if (options.cross_memory_read != nullptr) group.set_cross_memory_read(options.cross_memory_read);
  // After it, every rank's group has published where its control block lies.
  HERD_MPI_CHECK(MPI_Barrier(comm));
  Status probe = Status::error(fmt::format("HERD_SHM_SINGLE_COPY=off on rank {}", rank));
  if (options.single_copy != SingleCopy::kOff) probe = group.probe_single_copy();
  // MIN of each: every rank can read; no rank requires it; the first rank
  // that cannot read (ranks: none).
  std::array<int, 3> votes = {probe.is_ok() ? 1 : 0, options.single_copy == SingleCopy::kOn ? 0 : 1,
                              probe.is_ok() ? ranks : rank};
  std::array<int, 3> agreed{};
  HERD_MPI_CHECK(MPI_Allreduce(votes.data(), agreed.data(), 3, MPI_INT, MPI_MIN, comm));
  if (agreed[0] == 1) {
    group.set_single_copy_bytes(options.single_copy_min_bytes, options.single_copy_end_bytes);
    // Mapping a peer's shared buffer needs the permission the probe checked.
    group.set_direct_min_bytes(kShmDirectMinBytes);
    return;
  }
  if (agreed[1] == 1) return;
  // Every rank names the first rank that cannot, with its own words.
  std::array<char, 512> why{};
  if (rank == agreed[2]) std::strncpy(why.data(), probe.message().c_str(), why.size() - 1);
  HERD_MPI_CHECK(MPI_Bcast(why.data(), static_cast<int>(why.size()), MPI_CHAR, agreed[2], comm));
  throw Error(fmt::format(
      "herd: HERD_SHM_SINGLE_COPY=on, but the shared-memory allreduce cannot copy once between "
      "the {} ranks: {}",
      ranks, why.data()));
}

}  // namespace

NodeShm::NodeShm(void* mapping, std::size_t bytes, int rank, int ranks, std::size_t slot_bytes,
                 std::chrono::milliseconds stall_timeout, std::optional<ShmLineMode> fixed_mode)
    : mapping_(mapping),
      bytes_(bytes),
      group_(rank, rank_regions(mapping, ranks, slot_bytes), slot_bytes, stall_timeout,
             fixed_mode) {}

NodeShm::~NodeShm() { munmap(mapping_, bytes_); }

std::unique_ptr<NodeShm> make_node_shm(MPI_Comm comm, const NodeShmOptions& options,
                                       std::string* why_not) {
  int rank = 0;
  int ranks = 0;
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  HERD_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  if (ranks < 2) {
    *why_not = "one rank";
    return nullptr;
  }
  const int node_ranks = ranks_on_this_machine(comm);
  if (node_ranks != ranks) {
    *why_not = fmt::format("the {} ranks are not all on one machine ({} on rank {}'s)", ranks,
                           node_ranks, rank);
    return nullptr;
  }
  const std::size_t bytes = static_cast<std::size_t>(ranks) * shm_region_bytes(options.slot_bytes);
  std::string error;
  void* mapping = nullptr;
  std::array<char, kNameBytes> name{};  // empty: rank 0 could not make it
  if (rank == 0) {
    const std::string made = unique_name();
    mapping = map_object(made, bytes, /*create=*/true, &error);
    if (mapping != nullptr) std::strncpy(name.data(), made.c_str(), name.size() - 1);
  }
  HERD_MPI_CHECK(MPI_Bcast(name.data(), static_cast<int>(name.size()), MPI_CHAR, 0, comm));
  if (name[0] == '\0') {
    if (rank != 0) error = "rank 0 could not make the shared memory";
  } else if (rank != 0) {
    mapping = map_object(name.data(), bytes, /*create=*/false, &error);
  }
  if (mapping != nullptr) {
    // The counters are zero (a new object reads as zeros); the pid lets the
    // others tell a dead rank from a slow one.
    shm_region_control(
        rank_regions(mapping, ranks, options.slot_bytes)[static_cast<std::size_t>(rank)])
        ->pid.value.store(static_cast<uint64_t>(getpid()));
  }
  // Also the barrier after which every member has mapped the object and set its pid.
  int mapped = mapping != nullptr ? 1 : 0;
  int all_mapped = 0;
  HERD_MPI_CHECK(MPI_Allreduce(&mapped, &all_mapped, 1, MPI_INT, MPI_MIN, comm));
  if (rank == 0 && name[0] != '\0') shm_unlink(name.data());
  if (all_mapped == 0) {
    if (mapping != nullptr) munmap(mapping, bytes);
    *why_not = error.empty() ? "another rank could not map the shared memory" : error;
    return nullptr;
  }
  auto node_shm = std::make_unique<NodeShm>(mapping, bytes, rank, ranks, options.slot_bytes,
                                            options.stall_timeout, options.fixed_mode);
  // Names of the peers from their world ranks, fault notices in and out
  // (fault_notice.h): a rank the group finds gone or frozen is a fault of
  // the job, and a fault elsewhere ends the group's waits.
  std::vector<std::string> names;
  for (int j = 0; j < ranks; ++j) names.push_back(describe_peer(comm, j));
  ShmWaitHooks hooks;
  hooks.describe = [names](int j) { return names[static_cast<std::size_t>(j)]; };
  hooks.fault = [] { return known_fault(); };
  hooks.failed = [](const std::string& message) { (void)announce_fault(message); };
  node_shm->group().set_wait_hooks(std::move(hooks));
  agree_on_single_copy(comm, rank, ranks, options, node_shm->group());
  return node_shm;
}

}  // namespace herd::collectives
