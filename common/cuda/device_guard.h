// DeviceGuard: makes a CUDA device current on the calling thread for one
// scope and restores the previous one after it, so that herd's calls on an
// application thread (recording a ready event, allocating a Tensor, driving
// a cycle) leave the caller's current device as they found it. On herd's own
// threads (common/thread_role.h) the device stays: see there why.
#pragma once

#include <cuda_runtime_api.h>

#include "common/cuda/cuda_check.h"
#include "common/thread_role.h"

namespace herd::detail {

class DeviceGuard {
 public:
  DeviceGuard() = default;
  ~DeviceGuard() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

  // Makes `device` current until the guard goes.
  [[nodiscard]] Status set(int device) {
    HERD_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous_));
    if (previous_ == device) return Status::ok();
    HERD_CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
    switched_ = !herd_owned_thread();
    return Status::ok();
  }

 private:
  int previous_ = 0;
  bool switched_ = false;
};

}  // namespace herd::detail
