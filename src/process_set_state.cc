#include "src/process_set_state.h"

#include <chrono>

#include <fmt/format.h>

#include "collectives/allreduce.h"
#include "collectives/mpi/eager_limit.h"
#include "collectives/mpi/host_layout.h"
#include "collectives/mpi/mpi_check.h"
#include "common/logging.h"
#include "herd/error.h"
#include "src/blocking_call.h"
#include "src/handle_state.h"
#include "src/mpi_control_channel.h"
#include "src/runtime.h"
#include "src/transport_fit.h"

namespace herd::detail {
namespace {

std::chrono::milliseconds collective_timeout(const Config& config) {
  return std::chrono::milliseconds(
      static_cast<int64_t>(config.collective_timeout_seconds * 1000.0));
}

int rank_in(MPI_Comm comm) {
  int rank = 0;
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  return rank;
}

// What fit_to_transport and the eager-piece agreement settled, for
// HERD_LOG_LEVEL=debug.
void log_transport_fit(int set_id, int set_size, const Config& fitted,
                       const collectives::MpiTransport& transport) {
  const std::size_t recursive_doubling_bytes =
      fitted.small_allreduce_bytes < 0 ? collectives::small_allreduce_threshold(set_size)
                                       : static_cast<std::size_t>(fitted.small_allreduce_bytes);
  HERD_LOG(kDebug,
           "process set {}: ring segments of {} bytes, eager pieces of {} bytes, recursive "
           "doubling up to {} bytes",
           set_id, fitted.ring_segment_bytes, transport.eager_piece_bytes(),
           recursive_doubling_bytes);
}

}  // namespace

ProcessSetState::ProcessSetState(int id, std::vector<int> ranks, MPI_Comm comm,
                                 const Config& config, GpuSupport* gpu)
    : id_(id), ranks_(std::move(ranks)), set_rank_(rank_in(comm)), queue_(ranks_[set_rank_]) {
  // Own communicators keep the set's messages apart from every other set's
  // and the application's, and control apart from data.
  Status duplicated = HERD_MPI_STATUS(MPI_Comm_dup(comm, &control_comm_));
  if (duplicated.is_ok()) duplicated = HERD_MPI_STATUS(MPI_Comm_dup(comm, &data_comm_));
  if (!duplicated.is_ok()) {
    stop();
    throw Error(fmt::format("process set {}: {}", id_, duplicated.message()));
  }
  // The settings left at auto that depend on how the ranks reach each other.
  const Config fitted = fit_to_transport(config, collectives::host_layout(data_comm_));
  transport_ = std::make_unique<collectives::MpiTransport>(
      data_comm_, collectives::kMaxMpiMessageBytes,
      collectives::agree_eager_piece_bytes(data_comm_, fitted.eager_piece_bytes));
  log_transport_fit(id_, static_cast<int>(ranks_.size()), fitted, *transport_);
  transport_->set_collective_timeout(collective_timeout(config));
  control_ = std::make_unique<MpiControlChannel>(control_comm_, collective_timeout(config));
  const ShmPath shm = make_shm_path(config);
  const std::string stop_reason =
      id_ == 0 ? "herd was shut down (herd::shutdown on some rank) before the operation completed"
               : fmt::format(
                     "process set {} was removed (or herd shut down) before the operation "
                     "completed",
                     id_);
  GpuSetContext gpu_context;
  gpu_context.comm = data_comm_;
  gpu_context.host_transport = transport_.get();
  gpu_context.global_ranks = ranks_;
  loop_ = std::make_shared<BackgroundLoop>(fitted, queue_, *control_, *transport_, ranks_,
                                           stop_reason, gpu, std::move(gpu_context), shm, id_);
  thread_ = std::thread([loop = loop_.get()] { loop->run(); });
}

ProcessSetState::~ProcessSetState() { stop(); }

ShmPath ProcessSetState::make_shm_path(const Config& config) {
  if (config.shm_allreduce_bytes == 0) return {};
  collectives::NodeShmOptions options;
  // A rank stuck this long inside an allreduce fails it instead of hanging.
  options.stall_timeout = collective_timeout(config);
  options.single_copy = config.shm_single_copy == ShmSingleCopy::kOn
                            ? collectives::NodeShmOptions::SingleCopy::kOn
                        : config.shm_single_copy == ShmSingleCopy::kOff
                            ? collectives::NodeShmOptions::SingleCopy::kOff
                            : collectives::NodeShmOptions::SingleCopy::kAuto;
  std::string why_not;
  node_shm_ = collectives::make_node_shm(data_comm_, options, &why_not);
  if (!node_shm_) {
    HERD_LOG(kDebug, "process set {}: allreduce over MPI only, not through shared memory: {}", id_,
             why_not);
    return {};
  }
  HERD_LOG(kDebug,
           "process set {}: allreduces of up to {} bytes through shared memory, copied once "
           "between the ranks' buffers from {} bytes up to {}",
           id_, config.shm_allreduce_bytes, node_shm_->group().single_copy_min_bytes(),
           node_shm_->group().single_copy_end_bytes());
  return {&node_shm_->group(), config.shm_allreduce_bytes < 0
                                   ? SIZE_MAX
                                   : static_cast<std::size_t>(config.shm_allreduce_bytes)};
}

Handle ProcessSetState::submit(TensorEntry entry) {
  entry.handle->set_driver(loop_);
  Handle handle(entry.handle);
  const Status queued = queue_.push(std::move(entry), !BlockingCallScope::active());
  if (!queued.is_ok()) {
    throw Error(name_the_rank_that_stopped(queued.message()), queued.kind());
  }
  return handle;
}

Handle ProcessSetState::join(int* last_rank) { return Handle(loop_->join(last_rank)); }

void ProcessSetState::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (loop_) loop_->request_shutdown();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
  control_.reset();
  transport_.reset();
  node_shm_.reset();
  // Reached from the destructor too, so failures are logged, not thrown.
  if (control_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&control_comm_));
  if (data_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&data_comm_));
}

}  // namespace herd::detail
