// collectives/mpi/mpi_check.h under MPI: a call that succeeds gives an OK
// Status, and one that fails (a send to a rank outside the communicator, with
// MPI_ERRORS_RETURN set) gives the exact message "<call> failed at
// <file>:<line>: <MPI's text>" through each of the four forms: the Status, the
// early return, the thrown herd::Error and the logged warning.
#include <unistd.h>

#include <cstdio>
#include <string>

#include <fmt/format.h>
#include <mpi.h>

#include "collectives/mpi/mpi_check.h"
#include "common/logging.h"
#include "herd/error.h"
#include "raw_mpi_test_util.h"

namespace herd::collectives::testing {
namespace {

// MPI's own text for `code`, read here without mpi_check.h.
std::string error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return std::string(text, static_cast<std::size_t>(length));
}

void expect_text(Tally& tally, const std::string& test_case, const std::string& expected,
                 const std::string& actual) {
  if (actual == expected) {
    tally.pass();
  } else {
    tally.fail(test_case, fmt::format("expected \"{}\", actual \"{}\"", expected, actual));
  }
}

// Returns early at the failing call, so `reached` stays false.
Status send_twice(MPI_Comm comm, int peer, bool* reached, int* line) {
  char byte = 0;
  *line = __LINE__ + 1;
  HERD_MPI_RETURN_IF_ERROR(MPI_Send(&byte, 1, MPI_BYTE, peer, 0, comm));
  *reached = true;
  return Status::ok();
}

// What `fn` writes to stderr (fd 2), read back from a temporary file.
template <typename Fn>
std::string captured_stderr(Fn&& fn) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  const int saved = dup(2);
  dup2(fileno(file), 2);
  fn();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::rewind(file);
  std::string text;
  char buffer[512];
  std::size_t read = 0;
  while ((read = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, read);
  std::fclose(file);
  return text;
}

void run(Tally& tally, MPI_Comm comm) {
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  int size = 0;
  MPI_Comm_size(comm, &size);
  char byte = 0;

  // The code MPI returns for the failing call, and so the text it must carry.
  const int code = MPI_Send(&byte, 1, MPI_BYTE, size, 0, comm);
  int error_class = MPI_SUCCESS;
  MPI_Error_class(code, &error_class);
  if (error_class != MPI_ERR_RANK) {
    tally.fail("MPI_Send to rank size()",
               fmt::format("expected MPI_ERR_RANK ({}), actual error class {}", MPI_ERR_RANK,
                           error_class));
    return;
  }
  const std::string mpi_text = error_text(code);
  const std::string call = "MPI_Send(&byte, 1, MPI_BYTE, size, 0, comm)";
  const std::string file = __FILE__;

  int expected_rank = -1;
  MPI_Comm_rank(comm, &expected_rank);
  int rank = -1;
  const Status ok = HERD_MPI_STATUS(MPI_Comm_rank(comm, &rank));
  if (ok.is_ok() && rank == expected_rank) {
    tally.pass();
  } else {
    tally.fail("HERD_MPI_STATUS of a call that succeeds",
               fmt::format("expected OK and rank {}, actual \"{}\" and rank {}", expected_rank,
                           ok.message(), rank));
  }

  const Status failed = HERD_MPI_STATUS(MPI_Send(&byte, 1, MPI_BYTE, size, 0, comm));
  const int status_line = __LINE__ - 1;
  expect_text(tally, "HERD_MPI_STATUS of a failing call",
              fmt::format("{} failed at {}:{}: {}", call, file, status_line, mpi_text),
              failed.is_ok() ? std::string("OK") : failed.message());

  bool reached = false;
  int return_line = 0;
  const Status returned = send_twice(comm, size, &reached, &return_line);
  expect_text(tally, "HERD_MPI_RETURN_IF_ERROR of a failing call",
              fmt::format("MPI_Send(&byte, 1, MPI_BYTE, peer, 0, comm) failed at {}:{}: {}", file,
                          return_line, mpi_text),
              returned.is_ok() ? std::string("OK") : returned.message());
  if (reached) tally.fail("HERD_MPI_RETURN_IF_ERROR", "went on after the failing call");

  std::string thrown = "nothing thrown";
  int check_line = 0;
  try {
    check_line = __LINE__ + 1;
    HERD_MPI_CHECK(MPI_Send(&byte, 1, MPI_BYTE, size, 0, comm));
  } catch (const Error& error) {
    thrown = error.what();
  }
  expect_text(tally, "HERD_MPI_CHECK of a failing call",
              fmt::format("herd: {} failed at {}:{}: {}", call, file, check_line, mpi_text),
              thrown);

  int warn_line = 0;
  const std::string logged = captured_stderr([&] {
    warn_line = __LINE__ + 1;
    HERD_MPI_WARN_IF_ERROR(MPI_Send(&byte, 1, MPI_BYTE, size, 0, comm));
  });
  expect_text(tally, "HERD_MPI_WARN_IF_ERROR of a failing call",
              fmt::format("[herd] WARN: {} failed at {}:{}: {}\n", call, file, warn_line, mpi_text),
              logged);
  const std::string quiet = captured_stderr([&] { HERD_MPI_WARN_IF_ERROR(MPI_Barrier(comm)); });
  expect_text(tally, "HERD_MPI_WARN_IF_ERROR of a call that succeeds", "", quiet);
}

}  // namespace
}  // namespace herd::collectives::testing

int main(int argc, char** argv) {
  return herd::collectives::testing::run_raw_mpi_test(argc, argv, "test_mpi_check",
                                                      herd::collectives::testing::run);
}
