// make_nccl_collectives in a build with CUDA but without NCCL: the executor
// uses the MPI path instead, so reaching this is a bug worth a clear message.
#include "src/gpu/device_collectives.h"

namespace herd::detail {

Status make_nccl_collectives(MPI_Comm, int, bool, collectives::AllreduceOptions,
                             std::unique_ptr<DeviceCollectives>*) {
  return Status::error(
      "this build of herd has no NCCL (configure found none); set HERD_GPU_ALLREDUCE=MPI");
}

}  // namespace herd::detail
