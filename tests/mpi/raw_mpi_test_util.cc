#include "raw_mpi_test_util.h"

#include <cstdio>

namespace herd::collectives::testing {

const ops::ReduceFn kFloatSum = float_sum();
const ops::ReduceFn kInt32Max = int32_max();

void Tally::fail(const std::string& test_case, const std::string& detail) {
  ++failed_;
  std::fprintf(stderr, "FAIL rank %d, %s: %s\n", rank_, test_case.c_str(), detail.c_str());
}

bool Tally::expect_ok(const std::string& test_case, const Status& status) {
  if (status.is_ok()) return true;
  fail(test_case, "unexpected error: " + status.message());
  return false;
}

int run_raw_mpi_test(int argc, char** argv, const char* program,
                     const std::function<void(Tally&, MPI_Comm)>& body) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int rank = 0;
  MPI_Comm_rank(comm, &rank);

  Tally tally(rank);
  body(tally, comm);

  int64_t local_failed = tally.failed();
  int64_t total_failed = 0;
  MPI_Allreduce(&local_failed, &total_failed, 1, MPI_INT64_T, MPI_SUM, comm);
  std::printf("%s rank %d: %lld passed, %lld failed\n", program, rank,
              static_cast<long long>(tally.passed()), static_cast<long long>(tally.failed()));
  MPI_Comm_free(&comm);
  MPI_Finalize();
  return total_failed == 0 ? 0 : 1;
}

}  // namespace herd::collectives::testing
