// The MPI path for GPU buffers: herd's host algorithms over MPI on pinned
// copies of the data (make_staged_collectives in device_collectives.h).
//
// The allreduce is a pipeline over blocks of block_bytes: every block's
// device-to-host copy is queued at once on a copy stream, each with an event;
// the calling thread takes block b as soon as its event fires, reduces it
// with the host allreduce (ring or recursive doubling, as on CPU tensors) and
// queues its host-to-device copy on the executor's stream. So block b+1
// crosses the bus down, and block b-1 back up, while the ring works on block
// b. The other collectives move their whole buffer down, run, and move the
// result up: they carry no fusion buffer and are rarely large on this path.
//
// Reuse of the pinned memory is safe without extra waits: the copy stream
// starts only after an event recorded on the executor's stream, behind the
// previous call's host-to-device copies.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "collectives/allgather.h"
#include "collectives/alltoall.h"
#include "collectives/broadcast.h"
#include "collectives/reducescatter.h"
#include "common/cuda/cuda_check.h"
#include "ops/reduce.h"
#include "src/gpu/device_buffers.h"
#include "src/gpu/device_collectives.h"

namespace herd::detail {
namespace {

int64_t total_of(const std::vector<int64_t>& sizes) {
  return std::accumulate(sizes.begin(), sizes.end(), int64_t{0});
}

class StagedCollectives final : public DeviceCollectives {
 public:
  StagedCollectives(collectives::Transport& transport, collectives::AllreduceOptions options,
                    std::size_t block_bytes)
      : transport_(transport),
        options_(options),
        segment_bytes_(options.segment_bytes),
        block_bytes_(std::max<std::size_t>(block_bytes, 1)) {}

  ~StagedCollectives() override {
    for (cudaEvent_t event : block_events_) (void)cudaEventDestroy(event);
    if (input_ready_ != nullptr) (void)cudaEventDestroy(input_ready_);
    if (copy_stream_ != nullptr) (void)cudaStreamDestroy(copy_stream_);
  }

  const char* kind() const override { return "MPI (host staging)"; }
  bool can_reduce(DataType) const override { return true; }

  Status allreduce(const void* send, void* recv, int64_t count, DataType dtype, ReduceOp op,
                   cudaStream_t stream) override {
    if (count == 0) return Status::ok();
    const std::size_t element = element_size(dtype);
    const std::size_t bytes = static_cast<std::size_t>(count) * element;
    uint8_t* host = nullptr;
    HERD_RETURN_IF_ERROR(sync_then_reserve(stream, bytes, &down_, &host));
    // Blocks hold whole elements.
    const std::size_t block = std::max<std::size_t>(block_bytes_ / element, 1) * element;
    const std::size_t blocks = (bytes + block - 1) / block;
    HERD_RETURN_IF_ERROR(ensure_streams(blocks));

    // Down: every block at once, each marked by its event.
    HERD_CUDA_RETURN_IF_ERROR(cudaEventRecord(input_ready_, stream));
    HERD_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(copy_stream_, input_ready_, 0));
    const auto* source = static_cast<const uint8_t*>(send);
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t offset = b * block;
      const std::size_t length = std::min(block, bytes - offset);
      HERD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(host + offset, source + offset, length,
                                                cudaMemcpyDeviceToHost, copy_stream_));
      HERD_CUDA_RETURN_IF_ERROR(cudaEventRecord(block_events_[b], copy_stream_));
    }
    // Reduce each block as it lands, and send it back up at once.
    const ops::ReduceFn reduce = ops::make_reduce_fn(dtype, op);
    auto* destination = static_cast<uint8_t*>(recv);
    for (std::size_t b = 0; b < blocks; ++b) {
      const std::size_t offset = b * block;
      const std::size_t length = std::min(block, bytes - offset);
      HERD_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(block_events_[b]));
      HERD_RETURN_IF_ERROR(
          collectives::allreduce(host + offset, host + offset,
                                 static_cast<int64_t>(length / element), element, reduce,
                                 transport_, options_)
              .with_context(fmt::format("MPI path, block {} of {}: ", b + 1, blocks)));
      HERD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(destination + offset, host + offset, length,
                                                cudaMemcpyHostToDevice, stream));
    }
    return Status::ok();
  }

  Status allgatherv(const void* send, void* recv, const std::vector<int64_t>& bytes_per_rank,
                    cudaStream_t stream) override {
    const auto mine = static_cast<std::size_t>(bytes_per_rank[transport_.rank()]);
    const auto total = static_cast<std::size_t>(total_of(bytes_per_rank));
    return through_host(send, mine, recv, total, stream, [&](uint8_t* in, uint8_t* out) {
      return collectives::ring_allgatherv(in, out, bytes_per_rank, transport_, segment_bytes_);
    });
  }

  Status broadcast(void* data, std::size_t bytes, int root, cudaStream_t stream) override {
    uint8_t* host = nullptr;
    HERD_RETURN_IF_ERROR(sync_then_reserve(stream, bytes, &down_, &host));
    const bool is_root = transport_.rank() == root;
    if (is_root) {
      HERD_RETURN_IF_ERROR(download(host, data, bytes, stream));
    } else {
      // The broadcast writes the pinned buffer, which copies queued earlier
      // on `stream` (a previous call's upload) may still be reading.
      HERD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    }
    HERD_RETURN_IF_ERROR(collectives::broadcast(host, bytes, root, transport_));
    return is_root ? Status::ok() : upload(data, host, bytes, stream);
  }

  Status reducescatterv(void* send, void* recv, const std::vector<int64_t>& counts, DataType dtype,
                        ReduceOp op, cudaStream_t stream) override {
    const std::size_t element = element_size(dtype);
    const auto total = static_cast<std::size_t>(total_of(counts)) * element;
    const auto mine = static_cast<std::size_t>(counts[transport_.rank()]) * element;
    return through_host(send, total, recv, mine, stream, [&](uint8_t* in, uint8_t* out) {
      return collectives::ring_reducescatter(
          in, out, counts, element, ops::make_reduce_fn(dtype, op), transport_, segment_bytes_);
    });
  }

  Status alltoallv(const void* send, const std::vector<int64_t>& send_bytes, void* recv,
                   const std::vector<int64_t>& recv_bytes, cudaStream_t stream) override {
    const auto sent = static_cast<std::size_t>(total_of(send_bytes));
    const auto received = static_cast<std::size_t>(total_of(recv_bytes));
    return through_host(send, sent, recv, received, stream, [&](uint8_t* in, uint8_t* out) {
      return collectives::pairwise_alltoallv(in, send_bytes, out, recv_bytes, transport_);
    });
  }

  Status async_error() override { return Status::ok(); }
  void abort() override {}

 private:
  // Growing a pinned buffer frees the old one, which copies queued earlier
  // may still read: wait for `stream` first. Not growing needs no wait.
  Status sync_then_reserve(cudaStream_t stream, std::size_t bytes, PinnedBuffer* buffer,
                           uint8_t** data) {
    if (bytes > buffer->capacity()) {
      HERD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
      if (copy_stream_ != nullptr) HERD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(copy_stream_));
    }
    return buffer->reserve(bytes, data);
  }

  // The whole of `send` (`sent` bytes) down to the pinned input buffer,
  // `host_op(in, out)` there, `received` bytes of the pinned output buffer
  // up to `recv`.
  template <typename HostOp>
  Status through_host(const void* send, std::size_t sent, void* recv, std::size_t received,
                      cudaStream_t stream, HostOp host_op) {
    uint8_t* host_in = nullptr;
    uint8_t* host_out = nullptr;
    HERD_RETURN_IF_ERROR(sync_then_reserve(stream, sent, &down_, &host_in));
    HERD_RETURN_IF_ERROR(sync_then_reserve(stream, received, &up_, &host_out));
    HERD_RETURN_IF_ERROR(download(host_in, send, sent, stream));
    HERD_RETURN_IF_ERROR(host_op(host_in, host_out));
    return upload(recv, host_out, received, stream);
  }

  // The work queued on `stream` (the producer's readiness, a prescale) first,
  // then the copy, then the host waits for it. It waits also with nothing to
  // copy: the caller then writes the pinned buffers, which a previous call's
  // uploads on `stream` may still be reading.
  static Status download(uint8_t* host, const void* device, std::size_t bytes,
                         cudaStream_t stream) {
    if (bytes > 0) {
      HERD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream));
    }
    HERD_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream));
    return Status::ok();
  }

  // Queued only: the executor's completion event follows it on `stream`.
  static Status upload(void* device, const uint8_t* host, std::size_t bytes, cudaStream_t stream) {
    if (bytes == 0) return Status::ok();
    HERD_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream));
    return Status::ok();
  }

  Status ensure_streams(std::size_t blocks) {
    if (copy_stream_ == nullptr) {
      HERD_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&copy_stream_, cudaStreamNonBlocking));
      HERD_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&input_ready_, cudaEventDisableTiming));
    }
    while (block_events_.size() < blocks) {
      cudaEvent_t event = nullptr;
      HERD_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
      block_events_.push_back(event);
    }
    return Status::ok();
  }

  collectives::Transport& transport_;
  const collectives::AllreduceOptions options_;
  const std::size_t segment_bytes_;
  const std::size_t block_bytes_;
  PinnedBuffer down_;  // device -> host: the input side
  PinnedBuffer up_;    // host -> device: results that need a second buffer
  cudaStream_t copy_stream_ = nullptr;
  cudaEvent_t input_ready_ = nullptr;
  std::vector<cudaEvent_t> block_events_;
};

}  // namespace

std::unique_ptr<DeviceCollectives> make_staged_collectives(collectives::Transport& transport,
                                                           collectives::AllreduceOptions options,
                                                           std::size_t block_bytes) {
  return std::make_unique<StagedCollectives>(transport, options, block_bytes);
}

}  // namespace herd::detail
