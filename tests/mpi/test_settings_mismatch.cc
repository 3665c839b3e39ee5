// Launched with a different HERD_FUSION_THRESHOLD on rank 0 than on the other
// ranks (mpiexec MPMD form, see CMakeLists.txt): herd::init must fail on every
// rank with a message naming the variable and each rank's value, rather than
// let the ranks plan different fusion groups and hang.
#include <cstdio>
#include <string>

#include <mpi.h>

#include "herd/herd.h"

int main() {
  // Initialize MPI ourselves so that herd's failed init leaves it usable here.
  int provided = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::string message;
  try {
    herd::init();
  } catch (const herd::Error& error) {
    message = error.what();
  }
  std::string expected = "HERD_FUSION_THRESHOLD differs across ranks: rank 0 0";
  for (int r = 1; r < size; ++r) expected += ", rank " + std::to_string(r) + " 67108864";
  int failed = message.find(expected) == std::string::npos ? 1 : 0;
  if (failed) {
    std::printf("rank %d: expected an init error containing \"%s\", got \"%s\"\n", rank,
                expected.c_str(), message.c_str());
  }
  // herd must not have started: calls still report "not initialized".
  try {
    herd::rank();
    std::printf("rank %d: herd::rank() after a failed init did not throw\n", rank);
    failed = 1;
  } catch (const herd::Error&) {
  }

  int failures = 0;
  MPI_Allreduce(&failed, &failures, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (rank == 0)
    std::printf("test_settings_mismatch: %d passed, %d failed\n", size - failures, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
