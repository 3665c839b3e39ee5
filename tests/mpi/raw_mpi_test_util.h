// Harness shared by the plain MPI programs that test the collectives layer
// over MpiTransport without the runtime (test_mpi_transport,
// test_mpi_collectives).
//
// Tally counts passed and failed cases and prints each failure as
// "FAIL rank R, <case>: <detail>". run_raw_mpi_test() owns the program's MPI:
// it initializes MPI_THREAD_MULTIPLE, hands the body a duplicate of
// MPI_COMM_WORLD, prints "<program> rank R: N passed, M failed" and returns
// the exit code, non-zero on every rank if any rank failed. Everything here
// runs on the program's main thread.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "../unit/collectives/collectives_test_util.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives::testing {

// float32 sum and int32 max, the reductions of the collectives unit tests.
extern const ops::ReduceFn kFloatSum;
extern const ops::ReduceFn kInt32Max;

class Tally {
 public:
  explicit Tally(int rank) : rank_(rank) {}

  void pass() { ++passed_; }
  void fail(const std::string& test_case, const std::string& detail);
  // Passes if `status` is OK, else fails with its message.
  bool expect_ok(const std::string& test_case, const Status& status);

  int64_t passed() const { return passed_; }
  int64_t failed() const { return failed_; }

 private:
  int rank_;
  int64_t passed_ = 0;
  int64_t failed_ = 0;
};

// Passes if data[i] == expected(i) for all i, else reports the first index
// that differs and how many do.
template <typename T, typename Expected>
void check_elements(Tally& tally, const std::string& test_case, const std::vector<T>& data,
                    const Expected& expected) {
  int64_t mismatches = 0;
  std::string first;
  for (std::size_t i = 0; i < data.size(); ++i) {
    const T want = expected(static_cast<int64_t>(i));
    if (data[i] == want) continue;
    if (mismatches++ == 0) {
      first = fmt::format("index {}: expected {}, actual {}", i, +want, +data[i]);
    }
  }
  if (mismatches == 0) {
    tally.pass();
  } else {
    tally.fail(test_case,
               fmt::format("{} ({} of {} elements wrong)", first, mismatches, data.size()));
  }
}

// The same after checking that `status` is OK (a failure of its own if not).
template <typename T, typename Expected>
void check_elements(Tally& tally, const std::string& test_case, const Status& status,
                    const std::vector<T>& data, const Expected& expected) {
  if (tally.expect_ok(test_case, status)) check_elements(tally, test_case, data, expected);
}

// The whole program around `body`: MPI_Init_thread, a Tally for this rank,
// body(tally, comm) on a duplicate of MPI_COMM_WORLD, the summary line, the
// sum of failures over all ranks, MPI_Finalize. Returns main's exit code.
int run_raw_mpi_test(int argc, char** argv, const char* program,
                     const std::function<void(Tally&, MPI_Comm)>& body);

}  // namespace herd::collectives::testing
