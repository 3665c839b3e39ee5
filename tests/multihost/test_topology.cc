// Where herd places each rank in a job across hosts, run by ctest over
// emulated hosts (scripts/emulated_hosts.py, network namespaces):
//
//   test_topology HOSTS RANKS_PER_HOST slot|node
//
// HOSTS hosts of RANKS_PER_HOST ranks each, placed as mpirun places them:
// `slot` (the default, consecutive ranks fill a host: rank r on host
// r / L) or `node` (mpirun --map-by node, ranks dealt round the hosts: rank
// r on host r % H). From that alone, in closed form:
//   - local_rank: r's position among its host's ranks in rank order (r % L,
//     or r / H dealt), local_size L;
//   - cross_rank: r's position among the ranks of its local rank, which is
//     its host's index, hosts numbered by their lowest rank (r / L, or
//     r % H dealt), cross_size H; is_homogeneous.
// The hosts are real to the program only through their network namespaces:
// every rank reads the inode of its own (/proc/self/ns/net) and the ranks
// gather them over MPI. Two ranks must share a namespace exactly when the
// closed form puts them on one host, and no rank may run in the namespace
// of pid 1 (the launching machine's). An allreduce and an allgather of
// rank-unique values then cross the hosts through herd.
#include <mpi.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "tests/mpi/mpi_test_util.h"

namespace {

using namespace herd_test;

struct Placement {
  int hosts = 1;
  int ranks_per_host = 1;
  bool dealt = false;  // --map-by node

  int host_of(int rank) const { return dealt ? rank % hosts : rank / ranks_per_host; }
  int local_rank_of(int rank) const { return dealt ? rank / hosts : rank % ranks_per_host; }
};

bool parse_count(const char* text, int* value) {
  char* end = nullptr;
  errno = 0;
  const long parsed = std::strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || parsed < 1 || parsed > 1024) return false;
  *value = static_cast<int>(parsed);
  return true;
}

// The inode of a process's network namespace; 0 where it cannot be read.
uint64_t netns_inode(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_ino);
}

void expect_eq(Recorder& rec, const std::string& case_name, const char* what, long long expected,
               long long actual) {
  rec.check(expected == actual, case_name,
            std::string(what) + ": expected " + std::to_string(expected) + ", actual " +
                std::to_string(actual));
}

void check_layout(Recorder& rec, const Placement& at, int rank) {
  expect_eq(rec, "layout", "size()", static_cast<long long>(at.hosts) * at.ranks_per_host,
            herd::size());
  expect_eq(rec, "layout", "rank()", rank, herd::rank());
  expect_eq(rec, "layout", "local_rank()", at.local_rank_of(rank), herd::local_rank());
  expect_eq(rec, "layout", "local_size()", at.ranks_per_host, herd::local_size());
  expect_eq(rec, "layout", "cross_rank()", at.host_of(rank), herd::cross_rank());
  expect_eq(rec, "layout", "cross_size()", at.hosts, herd::cross_size());
  expect_eq(rec, "layout", "is_homogeneous()", 1, herd::is_homogeneous() ? 1 : 0);
}

// Same namespace <=> same host, for every pair of ranks.
void check_namespaces(Recorder& rec, const Placement& at, int rank, int size) {
  const uint64_t mine = netns_inode("/proc/self/ns/net");
  const uint64_t launcher = netns_inode("/proc/1/ns/net");
  rec.check(mine != 0, "namespace",
            "cannot stat /proc/self/ns/net: " + std::string(strerror(errno)));
  rec.check(mine != launcher, "namespace",
            "rank " + std::to_string(rank) + " runs in pid 1's network namespace (inode " +
                std::to_string(mine) + "), not in an emulated host's");
  std::vector<uint64_t> all(static_cast<std::size_t>(size));
  MPI_Allgather(&mine, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, MPI_COMM_WORLD);
  for (int other = 0; other < size; ++other) {
    const bool shared = all[other] == mine;
    const bool same_host = at.host_of(other) == at.host_of(rank);
    rec.check(shared == same_host, "namespace",
              "ranks " + std::to_string(rank) + " and " + std::to_string(other) + " are " +
                  (same_host ? "placed on one host (" : "placed on different hosts (") +
                  std::to_string(at.host_of(rank)) + ", " + std::to_string(at.host_of(other)) +
                  ") but their network namespaces are inodes " + std::to_string(mine) + " and " +
                  std::to_string(all[other]));
  }
}

// Rank-unique values through herd across the hosts: an int64 sum of
// (r + 1) * 1000 + i, whose total is 1000 p (p + 1) / 2 + p i, and an
// allgather of one row per rank (r, host of r).
void check_collectives(Recorder& rec, const Placement& at, int rank, int size) {
  constexpr int64_t kCount = 4099;
  std::vector<int64_t> values(kCount);
  for (int64_t i = 0; i < kCount; ++i) values[i] = (rank + 1) * int64_t{1000} + i;
  const herd::TensorView view{values.data(), herd::DataType::kInt64, {kCount}};
  herd::allreduce("topology/sum", view, view, herd::ReduceOp::kSum);
  {
    CaseCheck c(rec, "allreduce across hosts");
    const int64_t p = size;
    for (int64_t i = 0; i < kCount; ++i) {
      const int64_t expected = 1000 * p * (p + 1) / 2 + p * i;
      if (values[i] != expected) c.mismatch(i, std::to_string(expected), std::to_string(values[i]));
    }
  }
  int64_t row[2] = {rank, at.host_of(rank)};
  herd::Tensor gathered{herd::DataType::kInt64, {0}};
  herd::allgather("topology/rows", {row, herd::DataType::kInt64, {1, 2}}, &gathered);
  CaseCheck c(rec, "allgather across hosts");
  if (gathered.shape() != std::vector<int64_t>{size, 2}) {
    c.fail("output shape " + shape_string(gathered.shape()) + ", expected [" +
           std::to_string(size) + ",2]");
    return;
  }
  const auto* got = static_cast<const int64_t*>(gathered.data());
  for (int r = 0; r < size; ++r) {
    if (got[2 * r] != r) c.mismatch(2 * r, std::to_string(r), std::to_string(got[2 * r]));
    if (got[2 * r + 1] != at.host_of(r))
      c.mismatch(2 * r + 1, std::to_string(at.host_of(r)), std::to_string(got[2 * r + 1]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Placement at;
  if (argc < 3 || argc > 4 || !parse_count(argv[1], &at.hosts) ||
      !parse_count(argv[2], &at.ranks_per_host) ||
      (argc == 4 && std::strcmp(argv[3], "slot") != 0 && std::strcmp(argv[3], "node") != 0)) {
    std::fprintf(stderr, "usage: test_topology HOSTS RANKS_PER_HOST [slot|node]\n");
    return 2;
  }
  at.dealt = argc == 4 && std::strcmp(argv[3], "node") == 0;
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_topology", world.rank);
  expect_eq(rec, "mpi", "MPI_COMM_WORLD's size",
            static_cast<long long>(at.hosts) * at.ranks_per_host, world.size);
  if (world.size == at.hosts * at.ranks_per_host) {
    check_namespaces(rec, at, world.rank, world.size);
    try {
      herd::init();
      check_layout(rec, at, world.rank);
      check_collectives(rec, at, world.rank, world.size);
      herd::shutdown();
    } catch (const std::exception& e) {
      rec.fail("main", std::string("threw: ") + e.what());
    }
  }
  return finish_program_owned_mpi(rec);
}
