// HERD_CUDA_RETURN_IF_ERROR / cuda_status: every CUDA runtime call checked,
// with the call, its error's name and text, and the file and line, as a
// Status (common/status.h). Used by every file of a build with CUDA, on
// whichever thread makes the call.
#pragma once

#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include "common/status.h"

namespace herd::detail {

// Status::ok() for cudaSuccess; otherwise "<call> failed at file:line:
// cudaErrorX (text)".
inline Status cuda_status(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return Status::ok();
  return Status::error(fmt::format("{} failed at {}:{}: {} ({})", call, file, line,
                                   cudaGetErrorName(error), cudaGetErrorString(error)));
}

}  // namespace herd::detail

#define HERD_CUDA_STATUS(call) ::herd::detail::cuda_status((call), #call, __FILE__, __LINE__)

// Stringifies `call` itself: through HERD_CUDA_STATUS the text would be
// macro-expanded first.
#define HERD_CUDA_RETURN_IF_ERROR(call) \
  HERD_RETURN_IF_ERROR(::herd::detail::cuda_status((call), #call, __FILE__, __LINE__))
