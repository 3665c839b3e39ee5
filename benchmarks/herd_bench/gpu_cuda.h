// herd-bench's CUDA helpers for the GPU sweeps (gpu_bench.h): every CUDA
// runtime call checked, RAII owners of device memory, pinned host memory and
// a stream, the copies and the poison every path's check needs, the
// device-to-device copy ceiling, and the choice of each rank's GPU.
//
// Compiled only where herd is built with CUDA. Called by herd-bench's main
// thread on every rank; select_gpu is collective over its communicator.
// Everything works on the calling thread's current device, which select_gpu
// sets once for the sweep.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstddef>
#include <functional>
#include <string>

namespace herd::bench {

// Throws std::runtime_error("<call> failed at <file>:<line>: cudaErrorX
// (text)") unless `error` is cudaSuccess.
void check_cuda(cudaError_t error, const char* call, const char* file, int line);

// Page-locked host memory from cudaMallocHost, freed on destruction; grows
// (and loses its contents) on reserve.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  // At least `bytes` bytes; returns the memory.
  void* reserve(std::size_t bytes);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A non-blocking stream of the current device, destroyed on destruction.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// Copies on `stream` and waits for them. Host memory may be pageable.
void copy_to_device(void* device, const void* host, std::size_t bytes, cudaStream_t stream);
void copy_to_host(void* host, const void* device, std::size_t bytes, cudaStream_t stream);

// Sets every byte of `bytes` device bytes to 0xFF on `stream` and waits: the
// GPU counterpart of bench_sweep.h's poison().
void poison_device(void* data, std::size_t bytes, cudaStream_t stream);

// `warmup` untimed calls of `queue` (which only queues work on `stream`),
// then `iterations` timed ones back to back, timed with CUDA events around
// them. Returns the mean seconds of one call.
double time_queued(const std::function<void()>& queue, int warmup, int iterations,
                   cudaStream_t stream);

// The d2d ceiling on the calling rank: time_queued of one cudaMemcpyAsync of
// `bytes` from `from` to `to` (device memory).
double time_device_copy(void* to, const void* from, std::size_t bytes, int warmup, int iterations,
                        cudaStream_t stream);

// The GPU a rank runs on.
struct GpuPlacement {
  int device = 0;    // CUDA ordinal: local rank % devices
  int devices = 0;   // devices visible to this rank
  std::string name;  // cudaDeviceProp::name
  // "" when no two ranks of the communicator are on the same GPU; otherwise
  // which two share one (NCCL needs a GPU per rank).
  std::string shared;
};

// Collective over `comm`: picks device local_rank % (visible devices), makes
// it current, and compares every rank's (host name, GPU UUID) so that every
// rank reports the same `shared`.
GpuPlacement select_gpu(MPI_Comm comm, int local_rank);

}  // namespace herd::bench

#define HERD_BENCH_CUDA(call) ::herd::bench::check_cuda((call), #call, __FILE__, __LINE__)
