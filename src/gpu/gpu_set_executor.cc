#include "src/gpu/gpu_set_executor.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>

#include "collectives/chunking.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/mpi_transport.h"
#include "common/cuda/cuda_check.h"
#include "common/cuda/device_guard.h"
#include "common/enforce.h"
#include "common/logging.h"
#include "herd/error.h"
#include "ops/cuda/device_kernels.h"
#include "src/collective_executor.h"
#include "src/timeline.h"

namespace herd::detail {
namespace {

std::string describe(const Response& spec, std::size_t entries) {
  if (entries <= 1) return fmt::format("{} '{}'", to_string(spec.collective), spec.name);
  return fmt::format("{} of '{}' and {} more", to_string(spec.collective), spec.name, entries - 1);
}

// NCCL reduces every herd dtype but int16 (nccl_communicator.h); known
// here without NCCL's header, which a build without NCCL lacks.
bool nccl_reduces(DataType dtype) { return dtype != DataType::kInt16; }

bool is_reduction(CollectiveType type) {
  return type == CollectiveType::kAllreduce || type == CollectiveType::kGroupedAllreduce ||
         type == CollectiveType::kReducescatter;
}

// A grouped allreduce's members as entries of their own, sharing the group's
// handle through the group entry, which stays in flight.
std::vector<TensorEntry> expand_group(const Response& spec, const TensorEntry& group) {
  std::vector<TensorEntry> members(group.group_inputs.size());
  for (std::size_t i = 0; i < members.size(); ++i) {
    members[i].request.shape = spec.group_shapes[i];
    members[i].input = group.group_inputs[i];
    members[i].output = group.group_outputs[i];
  }
  return members;
}

// The timeline's name of what runs on the stream: NCCL's call, or the
// staged path (device to host, MPI, back); null for a barrier, which runs
// nothing.
const char* activity_label(CollectiveType type, bool nccl) {
  switch (type) {
    case CollectiveType::kAllreduce:
    case CollectiveType::kGroupedAllreduce: return nccl ? "NCCL_ALLREDUCE" : "STAGED_ALLREDUCE";
    case CollectiveType::kAllgather: return nccl ? "NCCL_ALLGATHER" : "STAGED_ALLGATHER";
    case CollectiveType::kBroadcast: return nccl ? "NCCL_BROADCAST" : "STAGED_BROADCAST";
    case CollectiveType::kAlltoall: return nccl ? "NCCL_ALLTOALL" : "STAGED_ALLTOALL";
    case CollectiveType::kReducescatter:
      return nccl ? "NCCL_REDUCESCATTER" : "STAGED_REDUCESCATTER";
    case CollectiveType::kBarrier: return nullptr;
  }
  return nullptr;
}

}  // namespace

GpuSetExecutor::GpuSetExecutor(const GpuSetContext& context, int device, int rank_label)
    : config_(*context.config),
      context_(context),
      device_(device),
      rank_label_(rank_label),
      set_size_(static_cast<int>(context.global_ranks.size())) {}

GpuSetExecutor::~GpuSetExecutor() {
  // stop() has completed every entry; what is left is memory and handles,
  // freed here with the device current (not after this body, as members).
  DeviceGuard guard;
  (void)guard.set(device_);
  nccl_.reset();
  staged_.reset();
  fusion_buffer_.release();
  scratch_.release();
  for (InFlight& group : in_flight_) (void)cudaEventDestroy(group.done);
  if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  if (comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&comm_));
}

Status GpuSetExecutor::ensure_started(const Status& device_set) {
  if (started_) return device_set;
  // A stream of its own, not blocking on the legacy default stream, so the
  // application's work there and herd's overlap.
  Status local = device_set;
  if (local.is_ok()) {
    local = HERD_CUDA_STATUS(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  // Every member learns whether every member could start, before the
  // collective calls below: a rank that failed alone would leave the others
  // waiting in them for ever.
  const int ok_here = local.is_ok() ? 1 : 0;
  int ok_everywhere = 0;
  HERD_RETURN_IF_ERROR(
      HERD_MPI_STATUS(MPI_Allreduce(&ok_here, &ok_everywhere, 1, MPI_INT, MPI_MIN, context_.comm))
          .with_context("starting the GPU executor: "));
  if (!local.is_ok()) return local.with_context("starting the GPU executor: ");
  if (ok_everywhere == 0) {
    return Status::error(fmt::format(
        "starting the GPU executor: another rank of the set [{}] could not start its own (its "
        "error says why)",
        fmt::join(context_.global_ranks, ",")));
  }
  HERD_RETURN_IF_ERROR(HERD_MPI_STATUS(MPI_Comm_dup(context_.comm, &comm_))
                           .with_context("starting the GPU executor: "));
  staged_ = make_staged_collectives(*context_.host_transport, allreduce_options(config_),
                                    static_cast<std::size_t>(config_.gpu_staging_bytes));
  started_ = true;
  return Status::ok();
}

Status GpuSetExecutor::collectives_for(const Response& spec, DeviceCollectives** out) {
  const bool use_nccl = nccl_built() && config_.gpu_allreduce == GpuAllreduce::kNccl;
  // NCCL has no int16: those reductions take the MPI path, on every rank
  // alike (the dtype is agreed).
  if (!use_nccl || (is_reduction(spec.collective) && !nccl_reduces(spec.dtype))) {
    *out = staged_.get();
    return Status::ok();
  }
  if (!nccl_) {
    // Only 1 turns it on for GPUs: auto leaves NCCL's flat allreduce.
    const bool hierarchical = config_.hierarchical_allreduce == HierarchicalAllreduce::kOn;
    HERD_RETURN_IF_ERROR(
        make_nccl_collectives(comm_, device_, hierarchical, allreduce_options(config_), &nccl_));
  }
  *out = nccl_.get();
  return Status::ok();
}

Status GpuSetExecutor::start(const Response& spec, const std::vector<TensorEntry*>& entries,
                             Contribution contribution) {
  DeviceGuard guard;
  HERD_RETURN_IF_ERROR(ensure_started(guard.set(device_)));
  for (const TensorEntry* entry : entries) {
    if (entry->ready_event) {
      HERD_CUDA_RETURN_IF_ERROR(
          cudaStreamWaitEvent(stream_, static_cast<cudaEvent_t>(entry->ready_event.get()), 0));
    }
  }
  DeviceCollectives* collectives = nullptr;
  HERD_RETURN_IF_ERROR(collectives_for(spec, &collectives));
  TensorEntry& first = *entries.front();
  switch (spec.collective) {
    case CollectiveType::kAllreduce:
      HERD_RETURN_IF_ERROR(allreduce(spec, entries, contribution, *collectives));
      break;
    case CollectiveType::kGroupedAllreduce: {
      HERD_ENFORCE_EQ(entries.size(), std::size_t{1});
      std::vector<TensorEntry> members = expand_group(spec, first);
      std::vector<TensorEntry*> pointers;
      for (TensorEntry& member : members) pointers.push_back(&member);
      if (!pointers.empty()) {
        HERD_RETURN_IF_ERROR(allreduce(spec, pointers, contribution, *collectives));
      }
      break;
    }
    case CollectiveType::kAllgather:
      HERD_RETURN_IF_ERROR(allgather(spec, first, *collectives));
      break;
    case CollectiveType::kBroadcast:
      HERD_RETURN_IF_ERROR(broadcast(spec, first, *collectives));
      break;
    case CollectiveType::kAlltoall:
      HERD_RETURN_IF_ERROR(alltoall(spec, first, *collectives));
      break;
    case CollectiveType::kReducescatter:
      HERD_RETURN_IF_ERROR(reducescatter(spec, first, *collectives));
      break;
    case CollectiveType::kBarrier: break;  // no data: agreement is the barrier
  }
  InFlight group;
  group.what = describe(spec, entries.size());
  HERD_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&group.done, cudaEventDisableTiming));
  const Status recorded = HERD_CUDA_STATUS(cudaEventRecord(group.done, stream_));
  if (!recorded.is_ok()) {
    (void)cudaEventDestroy(group.done);
    return recorded;
  }
  for (TensorEntry* entry : entries) group.entries.push_back(std::move(*entry));
  group.started = Clock::now();
  Timeline& timeline = process_timeline();
  group.activity =
      timeline.on() ? activity_label(spec.collective, collectives == nccl_.get()) : nullptr;
  if (group.activity != nullptr) {
    for (const TensorEntry& entry : group.entries) {
      if (entry.handle)
        timeline.begin(entry.request.name, context_.set_id, group.activity, group.started);
    }
  }
  in_flight_.push_back(std::move(group));
  return Status::ok();
}

void GpuSetExecutor::end_activity(const InFlight& group) {
  if (group.activity == nullptr) return;
  Timeline& timeline = process_timeline();
  const Timeline::Clock::time_point now = Timeline::Clock::now();
  for (const TensorEntry& entry : group.entries) {
    if (entry.handle) timeline.end(entry.request.name, context_.set_id, now);
  }
}

Status GpuSetExecutor::allreduce(const Response& spec, const std::vector<TensorEntry*>& entries,
                                 Contribution contribution, DeviceCollectives& collectives) {
  const std::size_t element = element_size(spec.dtype);
  int64_t total = 0;
  for (const TensorEntry* entry : entries) total += entry->request.num_elements();
  if (total == 0) return Status::ok();
  const std::size_t bytes = static_cast<std::size_t>(total) * element;
  const bool prescaled = !contribution.identity && spec.prescale != 1.0;
  const ReduceOp reduce_op = spec.op == ReduceOp::kAverage ? ReduceOp::kSum : spec.op;

  const void* input = nullptr;
  uint8_t* buffer = nullptr;
  if (contribution.identity) {
    // A joined rank's entries hold host stand-ins: contribute the identity
    // from the device instead, and drop the result.
    HERD_RETURN_IF_ERROR(scratch_.reserve(device_, bytes, &buffer));
    HERD_RETURN_IF_ERROR(ops::cuda::fill_identity(buffer, total, spec.dtype, spec.op, stream_));
    input = buffer;
  } else if (entries.size() == 1) {
    const TensorEntry& entry = *entries.front();
    input = entry.input.data;
    buffer = static_cast<uint8_t*>(entry.output.data);
    // A prescale must not touch the input: scale a copy in the output.
    if (prescaled && input != buffer) {
      HERD_CUDA_RETURN_IF_ERROR(
          cudaMemcpyAsync(buffer, input, bytes, cudaMemcpyDeviceToDevice, stream_));
      input = buffer;
    }
  } else {
    HERD_RETURN_IF_ERROR(fusion_buffer_.reserve(device_, bytes, &buffer));
    std::vector<ops::cuda::CopyTask> pack;
    std::size_t offset = 0;
    for (const TensorEntry* entry : entries) {
      const std::size_t length = entry->input.num_bytes();
      if (length > 0) pack.push_back({entry->input.data, buffer + offset, length});
      offset += length;
    }
    HERD_RETURN_IF_ERROR(ops::cuda::batched_copy(pack, stream_));
    input = buffer;
  }
  if (prescaled) {
    HERD_RETURN_IF_ERROR(ops::cuda::scale(buffer, total, spec.dtype, spec.prescale, stream_));
  }
  HERD_RETURN_IF_ERROR(
      collectives.allreduce(input, buffer, total, spec.dtype, reduce_op, stream_)
          .with_context(fmt::format("{} allreduce of {} elements: ", collectives.kind(), total)));
  if (contribution.identity) return Status::ok();
  HERD_RETURN_IF_ERROR(finish_reduction(spec, buffer, total));
  if (entries.size() > 1) {
    std::vector<ops::cuda::CopyTask> unpack;
    std::size_t offset = 0;
    for (const TensorEntry* entry : entries) {
      const std::size_t length = entry->output.num_bytes();
      if (length > 0) unpack.push_back({buffer + offset, entry->output.data, length});
      offset += length;
    }
    HERD_RETURN_IF_ERROR(ops::cuda::batched_copy(unpack, stream_));
  }
  return Status::ok();
}

Status GpuSetExecutor::finish_reduction(const Response& spec, void* data, int64_t count) {
  if (spec.op == ReduceOp::kAverage) {
    return ops::cuda::average(data, count, spec.dtype, set_size_, spec.postscale, stream_);
  }
  return ops::cuda::scale(data, count, spec.dtype, spec.postscale, stream_);
}

Status GpuSetExecutor::allgather(const Response& spec, TensorEntry& entry,
                                 DeviceCollectives& collectives) {
  HERD_ENFORCE_EQ(spec.rank_extents.size(), static_cast<std::size_t>(set_size_));
  const int64_t row_bytes =
      row_elements(entry.request.shape) * static_cast<int64_t>(element_size(spec.dtype));
  const AllgatherPlan plan = plan_allgather(spec.rank_extents, row_bytes);
  HERD_RETURN_IF_ERROR(allocate_output(spec, entry, plan.total_rows));
  return collectives.allgatherv(entry.input.data, entry.output_tensor->data(), plan.bytes_per_rank,
                                stream_);
}

Status GpuSetExecutor::allocate_output(const Response& spec, TensorEntry& entry, int64_t rows) {
  try {
    entry.output_tensor->reset(spec.dtype, with_rows(entry.request.shape, rows),
                               Device::gpu(device_));
  } catch (const Error& error) {
    return Status::error(error.what());
  }
  return Status::ok();
}

Status GpuSetExecutor::broadcast(const Response& spec, TensorEntry& entry,
                                 DeviceCollectives& collectives) {
  const auto& ranks = context_.global_ranks;
  const auto root = std::find(ranks.begin(), ranks.end(), spec.root);
  HERD_ENFORCE(root != ranks.end());
  return collectives.broadcast(entry.input.data, entry.input.num_bytes(),
                               static_cast<int>(root - ranks.begin()), stream_);
}

Status GpuSetExecutor::alltoall(const Response& spec, TensorEntry& entry,
                                DeviceCollectives& collectives) {
  const auto ranks = static_cast<std::size_t>(set_size_);
  const auto me = static_cast<std::size_t>(entry.request.rank);
  HERD_ENFORCE_EQ(spec.rank_extents.size(), ranks * ranks);
  const int64_t row_bytes =
      row_elements(entry.request.shape) * static_cast<int64_t>(element_size(spec.dtype));
  AlltoallPlan plan = plan_alltoall(spec.rank_extents, ranks, me, row_bytes);
  HERD_RETURN_IF_ERROR(allocate_output(spec, entry, plan.total_rows));
  HERD_RETURN_IF_ERROR(collectives.alltoallv(
      entry.input.data, plan.send_bytes, entry.output_tensor->data(), plan.recv_bytes, stream_));
  // Host data, read by the caller only after the handle completes.
  if (entry.received_splits != nullptr) *entry.received_splits = std::move(plan.received_rows);
  return Status::ok();
}

Status GpuSetExecutor::reducescatter(const Response& spec, TensorEntry& entry,
                                     DeviceCollectives& collectives) {
  const ReducescatterPlan plan =
      plan_reducescatter(entry.request.shape, set_size_, entry.request.rank);
  HERD_RETURN_IF_ERROR(allocate_output(spec, entry, plan.my_rows));
  // The caller's input stays unchanged: prescale (and the MPI path's
  // in-place reduction) work on a copy.
  const std::size_t bytes = entry.input.num_bytes();
  uint8_t* work = nullptr;
  HERD_RETURN_IF_ERROR(scratch_.reserve(device_, bytes, &work));
  if (bytes > 0) {
    HERD_CUDA_RETURN_IF_ERROR(
        cudaMemcpyAsync(work, entry.input.data, bytes, cudaMemcpyDeviceToDevice, stream_));
  }
  const int64_t count = entry.input.num_elements();
  HERD_RETURN_IF_ERROR(ops::cuda::scale(work, count, spec.dtype, spec.prescale, stream_));
  const ReduceOp op = spec.op == ReduceOp::kAverage ? ReduceOp::kSum : spec.op;
  HERD_RETURN_IF_ERROR(collectives.reducescatterv(work, entry.output_tensor->data(), plan.counts,
                                                  spec.dtype, op, stream_));
  return finish_reduction(spec, entry.output_tensor->data(), plan.my_count);
}

Status GpuSetExecutor::poll(const CompleteFn& complete) {
  if (in_flight_.empty()) return Status::ok();
  DeviceGuard guard;
  HERD_RETURN_IF_ERROR(guard.set(device_));
  // Stream order: groups finish in the order they started.
  while (!in_flight_.empty()) {
    InFlight& group = in_flight_.front();
    const cudaError_t state = cudaEventQuery(group.done);
    if (state == cudaErrorNotReady) {
      // Not an error, but the runtime keeps it as the thread's last error,
      // where the next kernel launch's check would find it.
      (void)cudaGetLastError();
      break;
    }
    const Status status = HERD_CUDA_STATUS(state).with_context(
        fmt::format("{} on gpu:{} (rank {}): ", group.what, device_, rank_label_));
    if (!status.is_ok()) {
      fail_in_flight(status, complete);
      return status;
    }
    end_activity(group);
    for (TensorEntry& entry : group.entries) complete(entry, Status::ok());
    (void)cudaEventDestroy(group.done);
    in_flight_.pop_front();
  }
  if (in_flight_.empty()) return Status::ok();
  if (nccl_) {
    Status error = nccl_->async_error();
    if (!error.is_ok()) {
      error =
          error.with_context(fmt::format("NCCL reported an error while {} was in flight on "
                                         "rank {}: ",
                                         in_flight_.front().what, rank_label_));
      fail_in_flight(error, complete);
      return error;
    }
  }
  const double timeout = config_.nccl_timeout_seconds;
  const std::chrono::duration<double> waited = Clock::now() - in_flight_.front().started;
  if (timeout > 0.0 && waited.count() > timeout) {
    const Status error = Status::error(fmt::format(
        "{} did not complete within HERD_NCCL_TIMEOUT={} s on rank {} (gpu:{}); a rank of the "
        "set [{}] may have died or stopped calling herd. herd aborted its NCCL communicator",
        in_flight_.front().what, timeout, rank_label_, device_,
        fmt::join(context_.global_ranks, ",")));
    fail_in_flight(error, complete);
    return error;
  }
  return Status::ok();
}

void GpuSetExecutor::fail_in_flight(const Status& status, const CompleteFn& complete) {
  if (nccl_) nccl_->abort();
  // The kernels queued behind an aborted collective (average, unpack) still
  // write the callers' outputs: let them finish before the handles say the
  // buffers are the callers' again.
  const Status drained = HERD_CUDA_STATUS(cudaStreamSynchronize(stream_));
  if (!drained.is_ok()) HERD_LOG(kError, "after {}: {}", status.message(), drained.message());
  for (InFlight& group : in_flight_) {
    end_activity(group);
    for (TensorEntry& entry : group.entries) complete(entry, status);
    (void)cudaEventDestroy(group.done);
  }
  in_flight_.clear();
}

void GpuSetExecutor::stop(const std::string& reason, const CompleteFn& complete) {
  // Work in flight was started on every rank, so it finishes unless a rank
  // is gone: give it until HERD_NCCL_TIMEOUT (poll's check), then abort.
  // Completing it early would hand the caller buffers still being written.
  while (busy()) {
    const Status status = poll(complete);
    if (!status.is_ok()) {
      HERD_LOG(kError, "while stopping ({}): {}", reason, status.message());
      return;  // poll failed what was left
    }
    if (busy()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

}  // namespace herd::detail
