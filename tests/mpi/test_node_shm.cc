// make_node_shm (collectives/mpi/node_shm.h) over real processes: who gets a
// group (one rank: none; else every rank), that nothing is left in /dev/shm,
// and the shared-memory allreduce between processes: float32 sums and int32
// maxima of counts from 0 past many chunks, with one-line and default slots,
// in place and not, many calls in a row, two groups of one communicator side
// by side, in both line modes and while rank 0 chooses between them; the
// same through the single-copy path, and the ranks' agreement on it: every
// rank has it where all can read each other, none where one rank cannot
// (a refusing read injected there) or turns it off, and with SingleCopy::kOn
// every rank fails naming the rank that cannot. Expected values are closed
// forms of the rank-unique inputs. Plain MPI, no runtime.
#include <mpi.h>

#include <dirent.h>
#include <unistd.h>

#include <sys/uio.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "collectives/mpi/node_shm.h"
#include "herd/error.h"
#include "raw_mpi_test_util.h"

namespace herd::collectives {
namespace {

using testing::check_elements;
using testing::Tally;

// Objects in /dev/shm made by the process `pid` (herd names them
// "herd-<pid>-..."; other tests may be running beside this one).
int herd_objects_in_dev_shm(int pid) {
  const std::string prefix = fmt::format("herd-{}-", pid);
  int found = 0;
  if (DIR* dir = opendir("/dev/shm")) {
    while (dirent* entry = readdir(dir)) {
      found += std::strncmp(entry->d_name, prefix.c_str(), prefix.size()) == 0;
    }
    closedir(dir);
  }
  return found;
}

void check_who_gets_a_group(Tally& tally, MPI_Comm comm, int rank, int ranks) {
  std::string why_not;
  auto shm = make_node_shm(comm, NodeShmOptions{}, &why_not);
  if (ranks == 1) {
    if (shm || why_not != "one rank") {
      tally.fail("one rank", fmt::format("expected no group and \"one rank\", got '{}'", why_not));
    } else {
      tally.pass();
    }
    return;
  }
  if (!shm) {
    tally.fail("group", "no group: " + why_not);
  } else if (shm->group().rank() != rank || shm->group().size() != ranks) {
    tally.fail("group", fmt::format("group rank {} of {}, expected {} of {}", shm->group().rank(),
                                    shm->group().size(), rank, ranks));
  } else {
    tally.pass();
  }
  // The object is unlinked once every rank has mapped it.
  int rank0_pid = getpid();
  MPI_Bcast(&rank0_pid, 1, MPI_INT, 0, comm);
  const int left = herd_objects_in_dev_shm(rank0_pid);
  if (left != 0) {
    tally.fail("unlinked",
               fmt::format("{} objects of rank 0 (pid {}) left in /dev/shm", left, rank0_pid));
  } else {
    tally.pass();
  }
}

void check_allreduces(Tally& tally, MPI_Comm comm, int rank, int ranks, std::size_t slot_bytes,
                      std::optional<ShmLineMode> mode, bool single_copy = false) {
  NodeShmOptions options;
  if (single_copy) {
    // Every call that can (none of these streams its output).
    options.single_copy = NodeShmOptions::SingleCopy::kOn;
    options.single_copy_min_bytes = 0;
    options.single_copy_end_bytes = SIZE_MAX;
  }
  options.slot_bytes = slot_bytes;
  options.stall_timeout = std::chrono::seconds(60);
  options.fixed_mode = mode;
  std::string why_not;
  auto shm = make_node_shm(comm, options, &why_not);
  auto second = make_node_shm(comm, options, &why_not);
  if (!shm || !second) {
    tally.fail(fmt::format("slot {}", slot_bytes), "no group: " + why_not);
    return;
  }
  const int64_t counts[] = {0, 1, 15, 16, 17, 1000, 65536 + 3, 1 << 20};
  for (int round = 0; round < 2; ++round) {
    for (int64_t count : counts) {
      // A one-line slot makes a chunk of 16 floats: keep the barriers few.
      if (slot_bytes < 1024 && count > 65536 + 3) continue;
      for (bool in_place : {false, true}) {
        const std::string name = fmt::format("{}slot {} mode {} round {} count {} {}",
                                             single_copy ? "single copy, " : "", slot_bytes,
                                             mode ? static_cast<int>(*mode) : -1, round, count,
                                             in_place ? "in place" : "out of place");
        // Alternate the two groups: each keeps its own sequence.
        ShmAllreduceGroup& group = (count % 2 == 0 ? shm : second)->group();
        std::vector<float> input(static_cast<std::size_t>(count));
        for (int64_t i = 0; i < count; ++i) {
          input[static_cast<std::size_t>(i)] = static_cast<float>(rank + 1 + (i + round) % 7);
        }
        std::vector<float> output = in_place ? input : std::vector<float>(input.size(), -1.0f);
        const Status status =
            group.allreduce(in_place ? output.data() : input.data(), output.data(), count,
                            sizeof(float), testing::kFloatSum);
        check_elements(tally, name + " float sum", status, output, [&](int64_t i) {
          return static_cast<float>(ranks * (ranks + 1) / 2 + ranks * ((i + round) % 7));
        });

        std::vector<int32_t> ints(static_cast<std::size_t>(count));
        for (int64_t i = 0; i < count; ++i) {
          ints[static_cast<std::size_t>(i)] = static_cast<int32_t>((i * 37 + rank * 101) % 211);
        }
        const Status max_status =
            group.allreduce(ints.data(), ints.data(), count, sizeof(int32_t), testing::kInt32Max);
        check_elements(tally, name + " int32 max", max_status, ints, [&](int64_t i) {
          int32_t best = 0;
          for (int r = 0; r < ranks; ++r) {
            best = std::max(best, static_cast<int32_t>((i * 37 + r * 101) % 211));
          }
          return best;
        });
      }
    }
  }
}

// The rank whose reads refuse_on_one_rank refuses (EPERM, as ptrace_scope
// or a seccomp filter would); the others read for real.
int refusing_rank = -1;
int this_rank = -1;
ssize_t refuse_on_one_rank(pid_t pid, const iovec* local, unsigned long local_count,
                           const iovec* remote, unsigned long remote_count, unsigned long flags) {
  if (this_rank == refusing_rank) {
    errno = EPERM;
    return -1;
  }
  return process_vm_readv(pid, local, local_count, remote, remote_count, flags);
}

// Whether every rank's group has the single-copy path, as the group says;
// fails the tally when the ranks disagree.
bool all_have_single_copy(Tally& tally, MPI_Comm comm, const std::string& name, NodeShm& shm) {
  const int has = shm.group().single_copy_end_bytes() > 0 ? 1 : 0;
  int fewest = 0;
  int most = 0;
  MPI_Allreduce(&has, &fewest, 1, MPI_INT, MPI_MIN, comm);
  MPI_Allreduce(&has, &most, 1, MPI_INT, MPI_MAX, comm);
  if (fewest != most) tally.fail(name, "the ranks disagree on the single-copy path");
  return fewest == 1;
}

void check_single_copy_agreement(Tally& tally, MPI_Comm comm, int rank, int ranks) {
  this_rank = rank;
  std::string why_not;
  {
    // Root on one machine: every rank can read every other.
    auto shm = make_node_shm(comm, NodeShmOptions{}, &why_not);
    if (!shm) return tally.fail("single copy auto", "no group: " + why_not);
    if (!all_have_single_copy(tally, comm, "single copy auto", *shm)) {
      tally.fail("single copy auto", "no single-copy path where process_vm_readv works");
    } else if (shm->group().single_copy_min_bytes() != kShmSingleCopyMinBytes ||
               shm->group().single_copy_end_bytes() != kShmSingleCopyEndBytes) {
      tally.fail("single copy auto", "not the default sizes");
    } else {
      tally.pass();
    }
  }
  // The last rank cannot read: nobody uses it, and the allreduces are exact.
  refusing_rank = ranks - 1;
  NodeShmOptions refused;
  refused.cross_memory_read = &refuse_on_one_rank;
  refused.single_copy_min_bytes = 0;
  refused.single_copy_end_bytes = SIZE_MAX;
  {
    auto shm = make_node_shm(comm, refused, &why_not);
    if (!shm) return tally.fail("single copy refused", "no group: " + why_not);
    if (all_have_single_copy(tally, comm, "single copy refused", *shm)) {
      tally.fail("single copy refused", "single copy although the last rank cannot read");
    } else {
      std::vector<float> buffer(100000, static_cast<float>(rank + 1));
      const Status status = shm->group().allreduce(buffer.data(), buffer.data(), 100000,
                                                   sizeof(float), testing::kFloatSum);
      check_elements(tally, "single copy refused: slots", status, buffer,
                     [&](int64_t) { return static_cast<float>(ranks * (ranks + 1) / 2); });
    }
  }
  // Turned off on rank 0 alone: nobody uses it.
  {
    NodeShmOptions options;
    if (rank == 0) options.single_copy = NodeShmOptions::SingleCopy::kOff;
    auto shm = make_node_shm(comm, options, &why_not);
    if (!shm) return tally.fail("single copy off on rank 0", "no group: " + why_not);
    if (all_have_single_copy(tally, comm, "single copy off on rank 0", *shm)) {
      tally.fail("single copy off on rank 0", "single copy although rank 0 turned it off");
    } else {
      tally.pass();
    }
  }
  // Required, and the last rank cannot: every rank fails, naming it.
  refused.single_copy = NodeShmOptions::SingleCopy::kOn;
  try {
    auto shm = make_node_shm(comm, refused, &why_not);
    tally.fail("single copy on, refused", "made a group");
  } catch (const Error& error) {
    const std::string expected = fmt::format(
        "HERD_SHM_SINGLE_COPY=on, but the shared-memory allreduce cannot copy once between the "
        "{} ranks: rank {} cannot read the memory of rank 0 (pid ",
        ranks, ranks - 1);
    if (std::string(error.what()).find(expected) == std::string::npos ||
        std::string(error.what()).find("Operation not permitted") == std::string::npos) {
      tally.fail(
          "single copy on, refused",
          fmt::format("expected '{}...Operation not permitted', got '{}'", expected, error.what()));
    } else {
      tally.pass();
    }
  }
  refusing_rank = -1;
}

}  // namespace
}  // namespace herd::collectives

int main(int argc, char** argv) {
  using namespace herd::collectives;
  return testing::run_raw_mpi_test(
      argc, argv, "test_node_shm", [](testing::Tally& tally, MPI_Comm comm) {
        int rank = 0;
        int ranks = 0;
        MPI_Comm_rank(comm, &rank);
        MPI_Comm_size(comm, &ranks);
        check_who_gets_a_group(tally, comm, rank, ranks);
        if (ranks < 2) return;
        // Rank 0 choosing the line mode, then each mode.
        for (const auto mode :
             {std::optional<ShmLineMode>{}, std::optional<ShmLineMode>{ShmLineMode::kKeep},
              std::optional<ShmLineMode>{ShmLineMode::kEvict}}) {
          check_allreduces(tally, comm, rank, ranks, 64, mode);
          check_allreduces(tally, comm, rank, ranks, kDefaultShmSlotBytes, mode);
        }
        check_allreduces(tally, comm, rank, ranks, kDefaultShmSlotBytes, std::nullopt,
                         /*single_copy=*/true);
        check_single_copy_agreement(tally, comm, rank, ranks);
      });
}
