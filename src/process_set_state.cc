#include "src/process_set_state.h"

#include <array>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "collectives/allreduce.h"
#include "collectives/mpi/eager_limit.h"
#include "collectives/mpi/host_layout.h"
#include "collectives/mpi/mpi_check.h"
#include "common/logging.h"
#include "herd/error.h"
#include "src/blocking_call.h"
#include "src/collective_executor.h"
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

collectives::NodeShmOptions node_shm_options(const Config& config) {
  collectives::NodeShmOptions options;
  // A rank stuck this long inside an allreduce fails it instead of hanging.
  options.stall_timeout = collective_timeout(config);
  options.single_copy = config.shm_single_copy == ShmSingleCopy::kOn
                            ? collectives::NodeShmOptions::SingleCopy::kOn
                        : config.shm_single_copy == ShmSingleCopy::kOff
                            ? collectives::NodeShmOptions::SingleCopy::kOff
                            : collectives::NodeShmOptions::SingleCopy::kAuto;
  return options;
}

// "host of each rank 0,1,0,1; ranks per host 2,2", for the messages about a
// layout the hierarchical allreduce cannot use.
std::string describe_layout(const collectives::HostLayout& layout) {
  std::vector<int> ranks_per_host(static_cast<std::size_t>(layout.hosts), 0);
  for (int host : layout.host_of) ++ranks_per_host[static_cast<std::size_t>(host)];
  return fmt::format("host of each rank, in set order, {}; ranks per host {}",
                     fmt::join(layout.host_of, ","), fmt::join(ranks_per_host, ","));
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
  const collectives::HostLayout layout = collectives::host_layout(data_comm_);
  const Config fitted = fit_to_transport(config, layout);
  transport_ = std::make_unique<collectives::MpiTransport>(
      data_comm_, collectives::kMaxMpiMessageBytes,
      collectives::agree_eager_piece_bytes(data_comm_, fitted.eager_piece_bytes));
  log_transport_fit(id_, static_cast<int>(ranks_.size()), fitted, *transport_);
  transport_->set_collective_timeout(collective_timeout(config));
  control_ = std::make_unique<MpiControlChannel>(control_comm_, collective_timeout(config));
  const ShmPath shm = make_shm_path(config);
  const HierarchicalPath hierarchical = make_hierarchical_path(fitted, layout);
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
  loop_ =
      std::make_shared<BackgroundLoop>(fitted, queue_, *control_, *transport_, ranks_, stop_reason,
                                       gpu, std::move(gpu_context), shm, id_, hierarchical);
  thread_ = std::thread([loop = loop_.get()] { loop->run(); });
}

ProcessSetState::~ProcessSetState() { stop(); }

ShmPath ProcessSetState::make_shm_path(const Config& config) {
  if (config.shm_allreduce_bytes == 0) return {};
  std::string why_not;
  node_shm_ = collectives::make_node_shm(data_comm_, node_shm_options(config), &why_not);
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

HierarchicalPath ProcessSetState::make_hierarchical_path(const Config& config,
                                                         const collectives::HostLayout& layout) {
  const bool allreduce_wanted = config.hierarchical_allreduce != HierarchicalAllreduce::kOff;
  const bool allgather_wanted = config.hierarchical_allgather != HierarchicalAllgather::kOff;
  if ((!allreduce_wanted && !allgather_wanted) || node_shm_) return {};
  const bool forced = config.hierarchical_allreduce == HierarchicalAllreduce::kOn;
  const bool allgather_forced = config.hierarchical_allgather == HierarchicalAllgather::kOn;
  // Every member computes the same layout, so every member returns alike
  // until the shared memory is made.
  if (!layout.spans_hosts() || (layout.uniform && layout.local_size == 1)) return {};
  if (!layout.uniform || !layout.contiguous) {
    // Rank 0 warns once for each setting that asked for the path by name.
    const auto warn_flat = [&](bool asked, const char* setting, const char* collective) {
      if (!asked || set_rank_ != 0) return;
      HERD_LOG(kWarning,
               "process set {}: {}=1, but its {}s run flat: the hierarchical {} needs the same "
               "number of the set's ranks on every host, each host's ranks consecutive in the set "
               "({})",
               id_, setting, collective, collective, describe_layout(layout));
    };
    warn_flat(forced, "HERD_HIERARCHICAL_ALLREDUCE", "allreduce");
    warn_flat(allgather_forced, "HERD_HIERARCHICAL_ALLGATHER", "allgather");
    return {};
  }
  const bool allreduce =
      allreduce_wanted &&
      (forced || collectives::hierarchical_keeps_reduction_order(layout.local_size));
  if (allreduce_wanted && !allreduce) {
    HERD_LOG(kDebug,
             "process set {}: no hierarchical allreduce: with {} ranks per host it would not give "
             "the flat algorithms' bits (HERD_HIERARCHICAL_ALLREDUCE=1 forces it)",
             id_, layout.local_size);
  }
  if (!allreduce && !allgather_wanted) return {};
  // The host's members in set order; one member of each host per local rank,
  // in host order (the contiguous layout numbers hosts in set order).
  Status split = HERD_MPI_STATUS(MPI_Comm_split(data_comm_, layout.host, set_rank_, &host_comm_));
  if (split.is_ok()) {
    split =
        HERD_MPI_STATUS(MPI_Comm_split(data_comm_, layout.local_rank, layout.host, &cross_comm_));
  }
  if (!split.is_ok()) {
    throw Error(fmt::format("process set {}, making the hierarchical allreduce's communicators: {}",
                            id_, split.message()));
  }
  if (!make_host_shm(config)) return {};
  cross_transport_ = std::make_unique<collectives::MpiTransport>(
      cross_comm_, collectives::kMaxMpiMessageBytes,
      collectives::agree_eager_piece_bytes(cross_comm_, config.eager_piece_bytes));
  cross_transport_->set_collective_timeout(collective_timeout(config));
  HERD_LOG(kDebug,
           "process set {}: hierarchical collectives over {} hosts of {} ranks (allreduce: {}; "
           "allgather: {}), {}",
           id_, layout.hosts, layout.local_size,
           !allreduce ? "none" : (forced ? "every allreduce" : "a candidate"),
           !allgather_wanted ? std::string("none")
           : allgather_forced
               ? std::string("every allgather")
               : fmt::format("from {} bytes of output", kHierarchicalAllgatherMinBytes),
           describe_layout(layout));
  HierarchicalPath path;
  path.group = {&host_shm_->group(), cross_transport_.get()};
  path.allreduce = allreduce;
  path.forced = forced;
  path.allgather = config.hierarchical_allgather;
  return path;
}

bool ProcessSetState::make_host_shm(const Config& config) {
  std::string why_not;
  std::string error;
  try {
    host_shm_ = collectives::make_node_shm(host_comm_, node_shm_options(config), &why_not);
  } catch (const Error& e) {
    // HERD_SHM_SINGLE_COPY=on on a host whose ranks cannot read each other:
    // that host's members throw; the set's other members must hear of it.
    error = e.what();
  }
  // MIN over the set: every host mapped its memory; the first member that
  // threw (set_size(): none).
  std::array<int, 2> votes = {host_shm_ ? 1 : 0, error.empty() ? set_size() : set_rank_};
  std::array<int, 2> agreed{};
  HERD_MPI_CHECK(MPI_Allreduce(votes.data(), agreed.data(), 2, MPI_INT, MPI_MIN, data_comm_));
  if (agreed[1] < set_size()) {
    std::array<char, 512> why{};
    if (set_rank_ == agreed[1]) std::strncpy(why.data(), error.c_str(), why.size() - 1);
    HERD_MPI_CHECK(
        MPI_Bcast(why.data(), static_cast<int>(why.size()), MPI_CHAR, agreed[1], data_comm_));
    host_shm_.reset();
    throw Error(
        fmt::format("process set {}, the hierarchical allreduce's shared memory on the "
                    "host of set rank {}: {}",
                    id_, agreed[1], why.data()));
  }
  if (agreed[0] == 0) {
    HERD_LOG(kDebug,
             "process set {}: no hierarchical allreduce: the shared memory of some host could "
             "not be made{}",
             id_, host_shm_ ? "" : fmt::format(" (on this rank's: {})", why_not));
    host_shm_.reset();
    return false;
  }
  return true;
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
  cross_transport_.reset();
  host_shm_.reset();
  // Reached from the destructor too, so failures are logged, not thrown.
  if (host_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&host_comm_));
  if (cross_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&cross_comm_));
  if (control_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&control_comm_));
  if (data_comm_ != MPI_COMM_NULL) HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&data_comm_));
}

}  // namespace herd::detail
