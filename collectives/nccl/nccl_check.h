// HERD_NCCL_RETURN_IF_ERROR / nccl_status: every NCCL call checked, with the
// call, the file and line, NCCL's text for the result code and NCCL's last
// error message, as a Status (common/status.h). The NCCL counterpart of
// common/cuda/cuda_check.h; used by collectives/nccl/ on whichever thread
// makes the call.
#pragma once

#include <nccl.h>

#include <string>

#include <fmt/format.h>

#include "common/status.h"

// For ncclGetLastError and ncclInProgress.
static_assert(NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0), "herd needs NCCL 2.14 or later");

namespace herd::detail {

// NCCL's last error message ("" when it has none). NCCL never clears it,
// so it may describe an earlier failure than the current one; messages
// label it "last NCCL error".
inline std::string nccl_last_error(ncclComm_t comm) {
  const char* text = ncclGetLastError(comm);
  return text != nullptr ? std::string(text) : std::string();
}

// "ncclUnhandledCudaError: ..." plus "; last NCCL error: ..." when NCCL has
// a last error message.
inline std::string nccl_error_text(ncclResult_t result, ncclComm_t comm = nullptr) {
  std::string text = ncclGetErrorString(result);
  const std::string last = nccl_last_error(comm);
  if (!last.empty()) text += "; last NCCL error: " + last;
  return text;
}

// Status::ok() for ncclSuccess; otherwise "<call> failed at file:line:
// <NCCL's text>". ncclInProgress is an error too: herd's communicators are
// blocking, so no call of theirs returns it.
inline Status nccl_status(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return Status::ok();
  return Status::error(
      fmt::format("{} failed at {}:{}: {}", call, file, line, nccl_error_text(result)));
}

}  // namespace herd::detail

#define HERD_NCCL_STATUS(call) ::herd::detail::nccl_status((call), #call, __FILE__, __LINE__)

// Stringifies `call` itself: through HERD_NCCL_STATUS the text would be
// macro-expanded first.
#define HERD_NCCL_RETURN_IF_ERROR(call) \
  HERD_RETURN_IF_ERROR(::herd::detail::nccl_status((call), #call, __FILE__, __LINE__))
