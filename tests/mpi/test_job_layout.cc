// Multi-rank test of where herd places this rank in the job: rank/size,
// local_rank/local_size (this machine), cross_rank/cross_size (the ranks of
// the same local rank, one per machine) and mpi_threads_supported().
//
// Each value is compared with MPI's own answer, computed here independently
// (MPI_Comm_split_type for the machine, MPI_Comm_split by local rank for the
// cross communicator). When MPI puts every rank on one machine, as under
// ctest, the closed form holds too: local_rank() == rank(), local_size() ==
// size(), cross_rank() == 0 and cross_size() == 1. Every one of the calls
// throws herd::Error before herd::init() and after herd::shutdown().
//
// The program initializes MPI itself (MPI_THREAD_MULTIPLE), so herd leaves
// MPI running after shutdown and the counts are summed over MPI at the end.
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using namespace herd_test;

void expect_layout_calls_throw(Recorder& rec, const std::string& case_name) {
  expect_throws(rec, case_name, "local_rank()", [] { herd::local_rank(); });
  expect_throws(rec, case_name, "local_size()", [] { herd::local_size(); });
  expect_throws(rec, case_name, "cross_rank()", [] { herd::cross_rank(); });
  expect_throws(rec, case_name, "cross_size()", [] { herd::cross_size(); });
  expect_throws(rec, case_name, "mpi_threads_supported()", [] { herd::mpi_threads_supported(); });
}

// MPI's own view of this rank's machine and cross communicator.
struct MpiLayout {
  int local_rank = -1;
  int local_size = -1;
  int cross_rank = -1;
  int cross_size = -1;
};

MpiLayout mpi_layout(int rank) {
  MpiLayout layout;
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &layout.local_rank);
  MPI_Comm_size(node, &layout.local_size);
  MPI_Comm_free(&node);
  MPI_Comm cross;
  MPI_Comm_split(MPI_COMM_WORLD, layout.local_rank, rank, &cross);
  MPI_Comm_rank(cross, &layout.cross_rank);
  MPI_Comm_size(cross, &layout.cross_size);
  MPI_Comm_free(&cross);
  return layout;
}

void check_layout(Recorder& rec, const MpiWorld& world) {
  const MpiLayout mpi = mpi_layout(world.rank);
  auto expect_eq = [&](const std::string& case_name, const char* what, long long expected,
                       long long actual) {
    rec.check(expected == actual, case_name,
              std::string(what) + ": expected " + std::to_string(expected) + ", actual " +
                  std::to_string(actual));
  };
  expect_eq("as MPI", "rank()", world.rank, herd::rank());
  expect_eq("as MPI", "size()", world.size, herd::size());
  expect_eq("as MPI", "local_rank()", mpi.local_rank, herd::local_rank());
  expect_eq("as MPI", "local_size()", mpi.local_size, herd::local_size());
  expect_eq("as MPI", "cross_rank()", mpi.cross_rank, herd::cross_rank());
  expect_eq("as MPI", "cross_size()", mpi.cross_size, herd::cross_size());
  expect_eq("as MPI", "mpi_threads_supported()", world.provided == MPI_THREAD_MULTIPLE ? 1 : 0,
            herd::mpi_threads_supported() ? 1 : 0);
  expect_eq("threads", "mpi_threads_supported()", 1, herd::mpi_threads_supported() ? 1 : 0);
  if (mpi.local_size == world.size) {
    expect_eq("one machine", "local_rank()", world.rank, herd::local_rank());
    expect_eq("one machine", "local_size()", world.size, herd::local_size());
    expect_eq("one machine", "cross_rank()", 0, herd::cross_rank());
    expect_eq("one machine", "cross_size()", 1, herd::cross_size());
  } else if (world.rank == 0) {
    std::printf("test_job_layout: ranks span several machines; one-machine checks skipped\n");
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_job_layout", world.rank);
  rec.check(world.provided == MPI_THREAD_MULTIPLE, "mpi", "MPI_THREAD_MULTIPLE not provided");
  expect_layout_calls_throw(rec, "before init");
  try {
    herd::init();
    check_layout(rec, world);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  expect_layout_calls_throw(rec, "after shutdown");
  return finish_program_owned_mpi(rec);
}
