#include "benchmarks/herd_bench/gpu_cuda.h"

#include <array>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "benchmarks/herd_bench/bench_mpi.h"

namespace herd::bench {
namespace {

// A CUDA event of the current device, destroyed on destruction.
class CudaEvent {
 public:
  CudaEvent() { HERD_BENCH_CUDA(cudaEventCreate(&event_)); }
  ~CudaEvent() { (void)cudaEventDestroy(event_); }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

void check_cuda(cudaError_t error, const char* call, const char* file, int line) {
  if (error == cudaSuccess) return;
  throw std::runtime_error(std::string(call) + " failed at " + file + ":" + std::to_string(line) +
                           ": " + cudaGetErrorName(error) + " (" + cudaGetErrorString(error) + ")");
}

PinnedBuffer::~PinnedBuffer() {
  if (data_ != nullptr) (void)cudaFreeHost(data_);
}

void* PinnedBuffer::reserve(std::size_t bytes) {
  if (bytes <= bytes_ && data_ != nullptr) return data_;
  if (data_ != nullptr) HERD_BENCH_CUDA(cudaFreeHost(data_));
  data_ = nullptr;
  bytes_ = 0;
  HERD_BENCH_CUDA(cudaMallocHost(&data_, bytes > 0 ? bytes : 1));
  bytes_ = bytes;
  return data_;
}

CudaStream::CudaStream() {
  HERD_BENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

CudaStream::~CudaStream() { (void)cudaStreamDestroy(stream_); }

void copy_to_device(void* device, const void* host, std::size_t bytes, cudaStream_t stream) {
  HERD_BENCH_CUDA(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
  HERD_BENCH_CUDA(cudaStreamSynchronize(stream));
}

void copy_to_host(void* host, const void* device, std::size_t bytes, cudaStream_t stream) {
  HERD_BENCH_CUDA(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
  HERD_BENCH_CUDA(cudaStreamSynchronize(stream));
}

void poison_device(void* data, std::size_t bytes, cudaStream_t stream) {
  HERD_BENCH_CUDA(cudaMemsetAsync(data, 0xFF, bytes, stream));
  HERD_BENCH_CUDA(cudaStreamSynchronize(stream));
}

double time_queued(const std::function<void()>& queue, int warmup, int iterations,
                   cudaStream_t stream) {
  for (int i = 0; i < warmup; ++i) queue();
  CudaEvent start, stop;
  HERD_BENCH_CUDA(cudaEventRecord(start.get(), stream));
  for (int i = 0; i < iterations; ++i) queue();
  HERD_BENCH_CUDA(cudaEventRecord(stop.get(), stream));
  HERD_BENCH_CUDA(cudaEventSynchronize(stop.get()));
  float milliseconds = 0;
  HERD_BENCH_CUDA(cudaEventElapsedTime(&milliseconds, start.get(), stop.get()));
  return milliseconds * 1e-3 / iterations;
}

double time_device_copy(void* to, const void* from, std::size_t bytes, int warmup, int iterations,
                        cudaStream_t stream) {
  return time_queued(
      [&] { HERD_BENCH_CUDA(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream)); },
      warmup, iterations, stream);
}

GpuPlacement select_gpu(MPI_Comm comm, int local_rank) {
  GpuPlacement placement;
  HERD_BENCH_CUDA(cudaGetDeviceCount(&placement.devices));
  if (placement.devices <= 0) throw std::runtime_error("no CUDA device visible");
  placement.device = local_rank % placement.devices;
  HERD_BENCH_CUDA(cudaSetDevice(placement.device));
  cudaDeviceProp properties{};
  HERD_BENCH_CUDA(cudaGetDeviceProperties(&properties, placement.device));
  placement.name = properties.name;

  // One fixed-size record per rank: its host's name, then its GPU's UUID.
  constexpr std::size_t kUuidBytes = sizeof(properties.uuid.bytes);
  constexpr std::size_t kRecordBytes = MPI_MAX_PROCESSOR_NAME + kUuidBytes;
  std::array<char, kRecordBytes> mine{};
  int length = 0;
  HERD_MPI_CHECK(MPI_Get_processor_name(mine.data(), &length));
  std::memcpy(mine.data() + MPI_MAX_PROCESSOR_NAME, properties.uuid.bytes, kUuidBytes);
  int ranks = 1;
  HERD_MPI_CHECK(MPI_Comm_size(comm, &ranks));
  std::vector<char> all(kRecordBytes * static_cast<std::size_t>(ranks));
  HERD_MPI_CHECK(MPI_Allgather(mine.data(), static_cast<int>(kRecordBytes), MPI_CHAR, all.data(),
                               static_cast<int>(kRecordBytes), MPI_CHAR, comm));
  for (int a = 0; a < ranks && placement.shared.empty(); ++a) {
    for (int b = a + 1; b < ranks; ++b) {
      const char* record_a = all.data() + kRecordBytes * static_cast<std::size_t>(a);
      const char* record_b = all.data() + kRecordBytes * static_cast<std::size_t>(b);
      if (std::memcmp(record_a, record_b, kRecordBytes) != 0) continue;
      placement.shared = "ranks " + std::to_string(a) + " and " + std::to_string(b) +
                         " share one GPU on host " + std::string(record_a);
      break;
    }
  }
  return placement;
}

}  // namespace herd::bench
