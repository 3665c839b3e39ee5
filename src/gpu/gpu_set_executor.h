// GpuSetExecutor: the GpuExecutor of one process set in a build with CUDA
// (interface and thread rules in src/gpu_support.h).
//
// Every GPU response runs on one stream of this rank's GPU, in the order the
// set agreed on:
//   1. the stream waits for each entry's ready event (the producer's work);
//   2. a fusion group is packed into the device fusion buffer by one batched
//      copy kernel (one tensor alone goes straight from input to output);
//   3. prescale; the collective, by NCCL or by the MPI path; the average's
//      division and the postscale, all as kernels on the buffer;
//   4. unpack by one batched copy kernel, then a completion event.
// The entries wait in flight until poll() sees their event fire, so the
// background thread goes on negotiating meanwhile. An NCCL error reported
// asynchronously, or a group in flight longer than HERD_NCCL_TIMEOUT, aborts
// the communicators (so no rank stays stuck in a kernel) and fails the set.
//
// The NCCL communicator and the dedicated MPI communicator are made at the
// first response that needs them, which every member reaches together.
#pragma once

#include <cuda_runtime_api.h>
#include <mpi.h>

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "src/gpu/device_buffers.h"
#include "src/gpu/device_collectives.h"
#include "src/gpu_support.h"

namespace herd::detail {

class GpuSetExecutor final : public GpuExecutor {
 public:
  // `device` is this rank's GPU; `rank_label` its global rank, for messages.
  GpuSetExecutor(const GpuSetContext& context, int device, int rank_label);
  ~GpuSetExecutor() override;

  Status start(const Response& spec, const std::vector<TensorEntry*>& entries,
               Contribution contribution) override;
  Status poll(const CompleteFn& complete) override;
  bool busy() const override { return !in_flight_.empty(); }
  void stop(const std::string& reason, const CompleteFn& complete) override;

 private:
  using Clock = std::chrono::steady_clock;

  // One started response: its entries wait here until `done` fires.
  struct InFlight {
    std::vector<TensorEntry> entries;
    cudaEvent_t done = nullptr;
    Clock::time_point started;
    std::string what;  // "allreduce of 'a' and 3 more", for messages
    // The timeline span begun on each entry's track at the start (NCCL_ALLREDUCE, ...),
    // which ends before the entry completes; null when none was begun.
    const char* activity = nullptr;
  };
  // Ends `group`'s activity span on its entries' tracks.
  void end_activity(const InFlight& group);

  // At the first start: the stream, then an agreement of every member that
  // all could start (`device_set`: whether this rank's device could be made
  // current), then the communicators' setup. Returns `device_set` after.
  Status ensure_started(const Status& device_set);
  // NCCL, or the MPI path for what NCCL cannot do here (settings, dtype).
  Status collectives_for(const Response& spec, DeviceCollectives** out);
  Status allreduce(const Response& spec, const std::vector<TensorEntry*>& entries,
                   Contribution contribution, DeviceCollectives& collectives);
  Status allgather(const Response& spec, TensorEntry& entry, DeviceCollectives& collectives);
  Status broadcast(const Response& spec, TensorEntry& entry, DeviceCollectives& collectives);
  Status alltoall(const Response& spec, TensorEntry& entry, DeviceCollectives& collectives);
  Status reducescatter(const Response& spec, TensorEntry& entry, DeviceCollectives& collectives);
  // The entry's output Tensor, on this GPU, with `rows` rows of the request's
  // shape (Tensor::reset's herd::Error as a Status).
  Status allocate_output(const Response& spec, TensorEntry& entry, int64_t rows);
  // The average's division by the set's size and the postscale
  // (ops::cuda::average), or the postscale alone.
  Status finish_reduction(const Response& spec, void* data, int64_t count);
  // Fails every group in flight with `status`, after aborting the
  // communicators so that no kernel of theirs keeps waiting.
  void fail_in_flight(const Status& status, const CompleteFn& complete);

  const Config& config_;
  const GpuSetContext context_;
  const int device_;
  const int rank_label_;
  const int set_size_;
  bool started_ = false;
  cudaStream_t stream_ = nullptr;
  MPI_Comm comm_ = MPI_COMM_NULL;  // own duplicate of the set's, for NCCL's setup
  std::unique_ptr<DeviceCollectives> nccl_;
  std::unique_ptr<DeviceCollectives> staged_;
  DeviceBuffer fusion_buffer_;
  DeviceBuffer scratch_;  // a joined rank's identity, reducescatter's working copy
  std::deque<InFlight> in_flight_;
};

}  // namespace herd::detail
