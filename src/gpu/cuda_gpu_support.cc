// GpuSupport of a build with CUDA (make_gpu_support in src/gpu_support.h):
// the rank's GPU, the checks of GPU views and the readiness events.
//
// One GPU per rank, as Horovod and NCCL expect: the device of the first GPU
// tensor a rank submits becomes its GPU, and a tensor elsewhere is refused
// at submission rather than failing later inside NCCL. Application threads
// call check_view and record_ready concurrently; a mutex guards the binding.
#include <cuda_runtime_api.h>

#include <mutex>

#include <fmt/format.h>

#include "common/cuda/cuda_check.h"
#include "common/cuda/device_guard.h"
#include "src/gpu/gpu_set_executor.h"
#include "src/gpu_support.h"

namespace herd::detail {
namespace {

class CudaGpuSupport final : public GpuSupport {
 public:
  CudaGpuSupport(int rank, int local_rank) : rank_(rank), local_rank_(local_rank) {}

  Status check_view(const std::string& what, const char* role, const TensorView& view) override {
    const int index = view.device.index;
    int devices = 0;
    const Status counted = device_count(&devices);
    if (!counted.is_ok()) {
      return Status::error(
          fmt::format("{}: {} is on gpu:{}, but rank {} can use no CUDA device: {}", what, role,
                      index, rank_, counted.message()));
    }
    if (index < 0 || index >= devices) {
      return Status::error(fmt::format("{}: {} is on gpu:{}, but rank {} sees {} CUDA device(s)",
                                       what, role, index, rank_, devices));
    }
    if (view.data != nullptr && view.num_elements() > 0) {
      HERD_RETURN_IF_ERROR(check_address(what, role, view));
    }
    // Bound only by a view that passed every check: a refused first view
    // must not tie the rank to its device.
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_ < 0) device_ = index;
    if (index != device_) {
      return Status::error(fmt::format(
          "{}: {} is on gpu:{}, but rank {} drives gpu:{} (where its first GPU tensor was); "
          "herd runs one GPU per rank: give each rank its own device, e.g. gpu:local_rank",
          what, role, index, rank_, device_));
    }
    return Status::ok();
  }

  // The address is memory of the view's GPU.
  static Status check_address(const std::string& what, const char* role, const TensorView& view) {
    const int index = view.device.index;
    cudaPointerAttributes attributes{};
    const Status looked = HERD_CUDA_STATUS(cudaPointerGetAttributes(&attributes, view.data));
    if (!looked.is_ok()) {
      return looked.with_context(fmt::format("{}: {} on gpu:{}: ", what, role, index));
    }
    const bool device_memory =
        attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!device_memory) {
      return Status::error(
          fmt::format("{}: {} claims to be on gpu:{}, but its address {} is host memory", what,
                      role, index, view.data));
    }
    if (attributes.device != index) {
      return Status::error(
          fmt::format("{}: {} claims to be on gpu:{}, but its address {} is "
                      "memory of gpu:{}",
                      what, role, index, view.data, attributes.device));
    }
    return Status::ok();
  }

  Status record_ready(const TensorView& view, std::shared_ptr<void>* event) override {
    DeviceGuard guard;
    HERD_RETURN_IF_ERROR(guard.set(view.device.index));
    cudaEvent_t recorded = nullptr;
    HERD_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&recorded, cudaEventDisableTiming));
    const Status status =
        HERD_CUDA_STATUS(cudaEventRecord(recorded, static_cast<cudaStream_t>(view.stream)));
    if (!status.is_ok()) {
      (void)cudaEventDestroy(recorded);
      return status;
    }
    // cudaEvent_t is a pointer type: held as void* so that no header above
    // src/gpu/ needs CUDA's.
    // Destroyed with its device current, on whichever thread drops it last
    // (a thread without a device would otherwise get a context on GPU 0).
    const int device = view.device.index;
    *event = std::shared_ptr<void>(static_cast<void*>(recorded), [device](void* p) {
      DeviceGuard destroying;
      (void)destroying.set(device);
      (void)cudaEventDestroy(static_cast<cudaEvent_t>(p));
    });
    return Status::ok();
  }

  int rank_device() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_ < 0) {
      int devices = 0;
      if (cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0) {
        device_ = local_rank_ % devices;
      } else {
        device_ = 0;
      }
    }
    return device_;
  }

  std::unique_ptr<GpuExecutor> make_executor(const GpuSetContext& context) override {
    return std::make_unique<GpuSetExecutor>(context, rank_device(), rank_);
  }

 private:
  // Cached after the first success; a failure (no driver, no device) is
  // asked again, and reported, each time.
  Status device_count(int* devices) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device_count_ < 0) {
      int count = 0;
      HERD_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&count));
      device_count_ = count;
    }
    *devices = device_count_;
    return Status::ok();
  }

  const int rank_;
  const int local_rank_;
  std::mutex mutex_;
  int device_ = -1;  // this rank's GPU, once known
  int device_count_ = -1;
};

}  // namespace

std::unique_ptr<GpuSupport> make_gpu_support(const Config&, int rank, int local_rank) {
  return std::make_unique<CudaGpuSupport>(rank, local_rank);
}

}  // namespace herd::detail
