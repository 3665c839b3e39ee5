// HERD_MPI_STATUS / HERD_MPI_RETURN_IF_ERROR / HERD_MPI_CHECK: every MPI call
// herd makes is checked, with the call, the file and line and MPI's text for
// the error code. The MPI counterpart of common/cuda/cuda_check.h and
// collectives/nccl/nccl_check.h.
//
// herd sets MPI_ERRORS_RETURN on every communicator it uses, so a failed call
// comes back here instead of aborting the job. Code whose errors travel as a
// Status (the background thread, the transports) uses HERD_MPI_STATUS or
// HERD_MPI_RETURN_IF_ERROR; code on the caller's thread that reports with an
// exception (init, setup of a communicator) uses HERD_MPI_CHECK, which
// throws herd::Error. Calls that release something on a path that must not
// throw (a destructor, shutdown) use HERD_MPI_WARN_IF_ERROR, which logs a
// warning with the same text and goes on.
#pragma once

#include <string>

#include <mpi.h>

#include <fmt/format.h>

#include "common/logging.h"
#include "common/status.h"
#include "herd/error.h"

namespace herd::detail {

// MPI's text for an error code: "MPI_ERR_TRUNCATE: message truncated".
inline std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return fmt::format("unknown MPI error code {}", code);
  }
  return std::string(text, static_cast<std::size_t>(length));
}

// Status::ok() for MPI_SUCCESS; otherwise "<call> failed at file:line:
// <MPI's text>".
inline Status mpi_status(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return Status::ok();
  return Status::error(
      fmt::format("{} failed at {}:{}: {}", call, file, line, mpi_error_text(code)));
}

// Throws herd::Error("herd: <message>") when the status failed.
inline void throw_if_failed(const Status& status) {
  if (!status.is_ok()) throw Error("herd: " + status.message());
}

// Logs the failure as a warning (common/logging.h); never throws.
inline void warn_if_failed(const Status& status) {
  if (!status.is_ok()) HERD_LOG(kWarning, "{}", status.message());
}

}  // namespace herd::detail

// Each macro stringifies `call` itself: passed on to HERD_MPI_STATUS, the
// argument would be macro-expanded first, and MPI's constants are macros
// (MPI_BYTE would read "(static_cast<MPI_Datatype> ...").
#define HERD_MPI_STATUS(call) ::herd::detail::mpi_status((call), #call, __FILE__, __LINE__)

#define HERD_MPI_RETURN_IF_ERROR(call) \
  HERD_RETURN_IF_ERROR(::herd::detail::mpi_status((call), #call, __FILE__, __LINE__))

#define HERD_MPI_CHECK(call) \
  ::herd::detail::throw_if_failed(::herd::detail::mpi_status((call), #call, __FILE__, __LINE__))

#define HERD_MPI_WARN_IF_ERROR(call) \
  ::herd::detail::warn_if_failed(::herd::detail::mpi_status((call), #call, __FILE__, __LINE__))
