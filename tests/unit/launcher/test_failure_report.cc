// The failure summary from mpirun's output as Open MPI 4.1 writes it, line
// for line: a rank that exits with an error, one killed by a signal, one that
// calls MPI_Abort, a C++ exception and a Python traceback, and the labels of
// --tag-output taken off what the user sees.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/herdrun/failure_report.h"
#include "launcher/herdrun/output_relay.h"

namespace herd::launcher {
namespace {

// Feeds `lines` as mpirun's stderr would carry them.
FailureReport report_of(const std::vector<std::string>& lines) {
  FailureReport report;
  for (const auto& line : lines) {
    if (auto tagged = parse_tagged_line(line)) {
      report.rank_line(tagged->rank, tagged->is_stderr, tagged->text);
    } else {
      report.mpirun_line(line);
    }
  }
  return report;
}

TEST_CASE("tagged lines: rank, stream and text") {
  auto line = parse_tagged_line("[1,3]<stderr>:boom: it failed");
  REQUIRE(line);
  CHECK(line->rank == 3);
  CHECK(line->is_stderr);
  CHECK(line->text == "boom: it failed");
  line = parse_tagged_line("[12,0]<stdout>:");
  REQUIRE(line);
  CHECK(line->rank == 0);
  CHECK_FALSE(line->is_stderr);
  CHECK(line->text.empty());
  CHECK_FALSE(parse_tagged_line("[herd 1] ERROR: x"));
  CHECK_FALSE(parse_tagged_line("--------------------"));
  CHECK_FALSE(parse_tagged_line("[1,2]stderr:x"));
}

TEST_CASE("a rank that exits with an error code") {
  const auto report = report_of({
      "[1,0]<stdout>:step 1",
      "[1,1]<stderr>:[herd 1] WARN: HERD_FOO is not a setting; an error?",
      "[1,1]<stderr>:RuntimeError: allreduce 'grad/fc1': shape mismatch",
      "[1,0]<stderr>:allreduce 'grad/fc1': error from rank 1",
      "--------------------------------------------------------------------------",
      "mpirun detected that one or more processes exited with non-zero status, thus causing",
      "the job to be terminated. The first process to do so was:",
      "",
      "  Process name: [[29438,1],1]",
      "  Exit code:    3",
      "--------------------------------------------------------------------------",
  });
  CHECK(report.first_failed_rank() == 1);
  CHECK(report.first_error_line(1) == "RuntimeError: allreduce 'grad/fc1': shape mismatch");
  CHECK(report.summary(3) ==
        "herdrun: the job failed (mpirun exited with status 3). Rank 1 failed first: it exited "
        "with code 3. Its first error line: RuntimeError: allreduce 'grad/fc1': shape mismatch");
}

TEST_CASE("a rank killed by a signal, whose peer's error came first") {
  const auto report = report_of({
      "[1,0]<stderr>:[herd 0] ERROR: a peer is gone",
      "[1,1]<stderr>:about to fail",
      "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed).",
  });
  // mpirun's word wins over the order of the error lines.
  CHECK(report.first_failed_rank() == 1);
  CHECK(report.summary(137) ==
        "herdrun: the job failed (mpirun exited with status 137). Rank 1 failed first: it was "
        "killed by signal 9 (Killed). Its first error line: about to fail");
}

TEST_CASE("a C++ exception that ends a rank") {
  const auto report = report_of({
      "[1,2]<stderr>:terminate called after throwing an instance of 'herd::Error'",
      "[1,2]<stderr>:  what():  allreduce 'w': dtype mismatch",
      "mpirun noticed that process rank 2 with PID 0 on node vm exited on signal 6 (Aborted).",
  });
  CHECK(report.first_error_line(2) ==
        "terminate called after throwing an instance of 'herd::Error': what():  allreduce 'w': "
        "dtype mismatch");
  CHECK(report.summary(134).find("Rank 2 failed first: it was killed by signal 6 (Aborted).") !=
        std::string::npos);
}

TEST_CASE("a Python traceback gives its exception's line") {
  const auto report = report_of({
      "[1,1]<stderr>:Traceback (most recent call last):",
      "[1,1]<stderr>:  File \"train.py\", line 3, in <module>",
      "[1,1]<stderr>:    raise ValueError('bad batch')",
      "[1,1]<stderr>:ValueError: bad batch",
      "  Process name: [[5,1],1]",
      "  Exit code:    1",
  });
  CHECK(report.first_error_line(1) == "ValueError: bad batch");
  CHECK(report.summary(1).find("Rank 1 failed first: it exited with code 1.") != std::string::npos);
}

TEST_CASE("MPI_Abort, and a failure mpirun does not attribute") {
  const auto aborted = report_of({
      "[1,0]<stderr>:fatal: no data",
      "MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD with errorcode 5.",
  });
  CHECK(aborted.first_failed_rank() == 0);
  CHECK(aborted.summary(5).find("it called MPI_Abort with error code 5. Its first error line: "
                                "fatal: no data") != std::string::npos);

  // Without mpirun's word the first error line decides.
  const auto unattributed = report_of({
      "[1,1]<stderr>:loading",
      "[1,0]<stdout>:error in the output is not an error line",
      "[1,3]<stderr>:Segmentation fault",
      "[1,1]<stderr>:Error: late",
  });
  CHECK(unattributed.first_failed_rank() == 3);
  CHECK(unattributed.summary(1) ==
        "herdrun: the job failed (mpirun exited with status 1). Rank 3 failed first. Its first "
        "error line: Segmentation fault");

  const auto silent = report_of({"[1,0]<stdout>:done"});
  CHECK_FALSE(silent.first_failed_rank());
  CHECK(silent.summary(1).find("No rank wrote an error line") != std::string::npos);
}

TEST_CASE("a rank that failed without an error line: its first stderr line, or none") {
  const auto report = report_of({
      "[1,1]<stderr>:[herd 1] WARN: herd::init: HERD_X is not a herd setting and is ignored",
      "[1,1]<stderr>:loading shard 3",
      "  Process name: [[5,1],1]",
      "  Exit code:    2",
      "[1,0]<stderr>:unrelated",
  });
  CHECK(report.summary(2).find("Its first error line: loading shard 3") != std::string::npos);
  const auto quiet = report_of({"  Process name: [[5,1],0]", "  Exit code:    2"});
  CHECK(quiet.summary(2).find("It wrote nothing to stderr.") != std::string::npos);
}

}  // namespace
}  // namespace herd::launcher
