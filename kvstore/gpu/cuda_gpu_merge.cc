// kvstore/gpu_merge.h in a build with CUDA, on the CUDA runtime API.
//
// Each merge GPU has one non-blocking stream of the store's: a push's copies
// into the merge GPU and its additions are queued on it in list order, so one
// scratch buffer serves every value of the key (the next copy into it waits
// for the addition that read it), and the call ends by synchronizing it.
// Peer access from a merge GPU to a source GPU is enabled where the hardware
// offers it, so that peer copies go directly; cudaMemcpyPeerAsync copies
// either way. Every call restores the caller's current device.
#include <cuda_runtime_api.h>

#include <fmt/format.h>

#include <map>
#include <set>
#include <utility>

#include "herd/error.h"
#include "herd/tensor.h"
#include "kvstore/gpu/add_kernel.h"
#include "kvstore/gpu_merge.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

void check(cudaError_t error, const std::string& what, int gpu, const char* call) {
  if (error == cudaSuccess) return;
  (void)cudaGetLastError();  // a non-sticky error must not fail the next call
  throw Error(fmt::format("{}: {} on gpu:{} failed: {} ({})", what, call, gpu,
                          cudaGetErrorName(error), cudaGetErrorString(error)));
}

bool on_gpu(const TensorView& view, int gpu) {
  return view.device.type == DeviceType::kGPU && view.device.index == gpu;
}

// Makes `gpu` the current device for one scope; restores the caller's after.
class DeviceScope {
 public:
  DeviceScope(const std::string& what, int gpu) {
    check(cudaGetDevice(&previous_), what, gpu, "cudaGetDevice");
    if (previous_ != gpu) {
      check(cudaSetDevice(gpu), what, gpu, "cudaSetDevice");
      switched_ = true;
    }
  }
  ~DeviceScope() {
    if (switched_) (void)cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

class CudaGpuMerge final : public GpuMerge {
 public:
  // Each stream is destroyed with its GPU current; the caller's device is
  // restored after.
  ~CudaGpuMerge() override {
    int previous = 0;
    const bool known = cudaGetDevice(&previous) == cudaSuccess;
    for (const auto& [gpu, stream] : streams_) {
      if (cudaSetDevice(gpu) == cudaSuccess) {
        (void)cudaStreamSynchronize(stream);
        (void)cudaStreamDestroy(stream);
      }
    }
    if (known) (void)cudaSetDevice(previous);
  }

  void check_view(const std::string& what, const TensorView& view) override {
    const int gpu = view.device.index;
    int devices = 0;
    const cudaError_t counted = cudaGetDeviceCount(&devices);
    if (counted != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(fmt::format("{} is on gpu:{}, but this process can use no CUDA device: {} ({})",
                              what, gpu, cudaGetErrorName(counted), cudaGetErrorString(counted)));
    }
    if (gpu < 0 || gpu >= devices) {
      throw Error(fmt::format("{} is on gpu:{}, but this process sees {} CUDA device(s)", what, gpu,
                              devices));
    }
    if (view.data == nullptr || view.num_elements() == 0) return;
    cudaPointerAttributes attributes{};
    check(cudaPointerGetAttributes(&attributes, view.data), what, gpu, "cudaPointerGetAttributes");
    const bool device_memory =
        attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    if (!device_memory) {
      throw Error(fmt::format("{} claims to be on gpu:{}, but its address {} is host memory", what,
                              gpu, view.data));
    }
    if (attributes.device != gpu) {
      throw Error(fmt::format("{} claims to be on gpu:{}, but its address {} is memory of gpu:{}",
                              what, gpu, view.data, attributes.device));
    }
  }

  void sum_to_host(const std::string& what, int64_t id, int merge_gpu,
                   const std::vector<TensorView>& values, TensorView out) override {
    const std::size_t bytes = out.num_bytes();
    if (values.empty() || bytes == 0) return;
    wait_for_queued_work(what, values);
    DeviceScope scope(what, merge_gpu);
    const cudaStream_t stream = stream_of(what, merge_gpu);
    Scratch& scratch = scratch_of(what, id, merge_gpu, out);
    for (std::size_t i = 0; i < values.size(); ++i) {
      const TensorView& value = values[i];
      const void* operand = value.data;
      if (i == 0 || !on_gpu(value, merge_gpu)) {
        void* into = i == 0 ? scratch.sum.data() : scratch.staging.data();
        copy_to_merge_gpu(what, value, into, merge_gpu, bytes, stream);
        operand = into;
      }
      if (i > 0) {
        check(add_into_async(out.dtype, scratch.sum.data(), operand, out.num_elements(), stream),
              what, merge_gpu, "the sum kernel's launch");
      }
    }
    check(cudaMemcpyAsync(out.data, scratch.sum.data(), bytes, cudaMemcpyDeviceToHost, stream),
          what, merge_gpu, "cudaMemcpyAsync of the sum to the host");
    check(cudaStreamSynchronize(stream), what, merge_gpu, "cudaStreamSynchronize after the sum");
  }

  void copy(const std::string& what, const TensorView& from, TensorView to) override {
    const std::size_t bytes = to.num_bytes();
    if (bytes == 0) return;
    const bool reads_gpu = from.device.type == DeviceType::kGPU;
    wait_for_queued_work(what, {from, to});
    const int gpu = reads_gpu ? from.device.index : to.device.index;
    DeviceScope scope(what, gpu);
    const cudaStream_t stream = stream_of(what, gpu);
    check(cudaMemcpyAsync(to.data, from.data, bytes, cudaMemcpyDefault, stream), what, gpu,
          "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), what, gpu, "cudaStreamSynchronize after the copy");
  }

 private:
  // A key's buffers on its merge GPU: the running sum, and the copy of the
  // value being added when it lives elsewhere.
  struct Scratch {
    int gpu = -1;
    Tensor sum;
    Tensor staging;
  };

  // Work queued before the call on the streams of the GPU views among
  // `views` (each view's stream, on its GPU) finishes first.
  static void wait_for_queued_work(const std::string& what, const std::vector<TensorView>& views) {
    std::set<std::pair<int, void*>> waited;
    for (const TensorView& value : views) {
      if (value.device.type != DeviceType::kGPU) continue;
      if (!waited.insert({value.device.index, value.stream}).second) continue;
      DeviceScope scope(what, value.device.index);
      check(cudaStreamSynchronize(static_cast<cudaStream_t>(value.stream)), what,
            value.device.index, "cudaStreamSynchronize of the view's stream");
    }
  }

  cudaStream_t stream_of(const std::string& what, int gpu) {
    auto it = streams_.find(gpu);
    if (it != streams_.end()) return it->second;
    cudaStream_t stream = nullptr;
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), what, gpu,
          "cudaStreamCreateWithFlags");
    streams_.emplace(gpu, stream);
    return stream;
  }

  Scratch& scratch_of(const std::string& what, int64_t id, int gpu, const TensorView& like) {
    Scratch& scratch = scratch_[id];
    if (scratch.gpu == gpu && scratch.sum.dtype() == like.dtype &&
        scratch.sum.shape() == like.shape) {
      return scratch;
    }
    try {
      scratch.gpu = -1;
      scratch.sum.reset(like.dtype, like.shape, Device::gpu(gpu));
      scratch.staging.reset(like.dtype, like.shape, Device::gpu(gpu));
    } catch (const Error& e) {
      throw Error(fmt::format("{}: the merge buffers on gpu:{}: {}", what, gpu, e.what()));
    }
    scratch.gpu = gpu;
    return scratch;
  }

  // Called with the merge GPU current.
  void copy_to_merge_gpu(const std::string& what, const TensorView& value, void* into,
                         int merge_gpu, std::size_t bytes, cudaStream_t stream) {
    if (value.device.type != DeviceType::kGPU) {
      check(cudaMemcpyAsync(into, value.data, bytes, cudaMemcpyHostToDevice, stream), what,
            merge_gpu, "cudaMemcpyAsync of a host value");
    } else if (value.device.index == merge_gpu) {
      check(cudaMemcpyAsync(into, value.data, bytes, cudaMemcpyDeviceToDevice, stream), what,
            merge_gpu, "cudaMemcpyAsync");
    } else {
      const int source = value.device.index;
      enable_peer_access(what, merge_gpu, source);
      const cudaError_t copied =
          cudaMemcpyPeerAsync(into, merge_gpu, value.data, source, bytes, stream);
      if (copied != cudaSuccess) {
        const std::string call = fmt::format("cudaMemcpyPeerAsync from gpu:{}", source);
        check(copied, what, merge_gpu, call.c_str());
      }
    }
  }

  // Called with the merge GPU current. Without peer access the driver
  // stages the copy through the host.
  void enable_peer_access(const std::string& what, int merge_gpu, int source) {
    if (!peers_.insert({merge_gpu, source}).second) return;
    int possible = 0;
    check(cudaDeviceCanAccessPeer(&possible, merge_gpu, source), what, merge_gpu,
          "cudaDeviceCanAccessPeer");
    if (possible == 0) return;
    const cudaError_t enabled = cudaDeviceEnablePeerAccess(source, 0);
    if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
      (void)cudaGetLastError();
      return;
    }
    check(enabled, what, merge_gpu, "cudaDeviceEnablePeerAccess");
  }

  std::map<int, cudaStream_t> streams_;  // per GPU
  std::map<int64_t, Scratch> scratch_;   // per key
  std::set<std::pair<int, int>> peers_;  // (merge GPU, source GPU) seen
};

}  // namespace

std::unique_ptr<GpuMerge> make_gpu_merge() { return std::make_unique<CudaGpuMerge>(); }

}  // namespace detail
}  // namespace kv
}  // namespace herd
