#include "src/runtime.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "common/logging.h"
#include "herd/error.h"
#include "src/handle_state.h"

namespace herd::detail {
namespace {

void check_mpi(int code, const char* call) {
  if (code != MPI_SUCCESS) throw Error("herd::init: " + collectives::mpi_error_string(call, code));
}

const char* thread_level_name(int level) {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown";
}

// Settings that decide message layouts or algorithms must be equal on every
// rank, or the ranks would disagree on the agreement vector's length, on
// fusion groups or on the algorithm, and hang. Every rank sees the same
// gathered values, so every rank throws the same error.
void check_settings_agree(const Config& config, int size) {
  struct Shared {
    const char* variable;
    int64_t value;
  };
  const Shared shared[] = {
      {"HERD_FUSION_THRESHOLD", config.fusion_threshold_bytes},
      {"HERD_CACHE_CAPACITY", config.cache_capacity},
      {"HERD_RING_SEGMENT_BYTES", config.ring_segment_bytes},
      {"HERD_SMALL_ALLREDUCE_BYTES", config.small_allreduce_bytes},
  };
  constexpr int kCount = sizeof(shared) / sizeof(shared[0]);
  int64_t mine[kCount];
  for (int i = 0; i < kCount; ++i) mine[i] = shared[i].value;
  std::vector<int64_t> all(static_cast<std::size_t>(kCount) * size);
  check_mpi(
      MPI_Allgather(mine, kCount, MPI_INT64_T, all.data(), kCount, MPI_INT64_T, MPI_COMM_WORLD),
      "MPI_Allgather (settings)");
  std::vector<std::string> clauses;
  for (int i = 0; i < kCount; ++i) {
    bool equal = true;
    std::vector<std::string> values;
    for (int r = 0; r < size; ++r) {
      equal = equal && all[r * kCount + i] == all[i];
      values.push_back(fmt::format("rank {} {}", r, all[r * kCount + i]));
    }
    if (!equal)
      clauses.push_back(
          fmt::format("{} differs across ranks: {}", shared[i].variable, fmt::join(values, ", ")));
  }
  if (!clauses.empty()) {
    throw Error(fmt::format("herd::init: {}; every rank must use the same value",
                            fmt::join(clauses, "; ")));
  }
}

}  // namespace

std::unique_ptr<Runtime> Runtime::start(const Config& config) {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) {
    throw Error(
        "herd::init: MPI has already been finalized (by herd::shutdown or the program); "
        "herd cannot start again in this process");
  }
  std::unique_ptr<Runtime> runtime(new Runtime());
  runtime->config_ = config;

  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    runtime->owns_mpi_ = true;
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    const std::string message = fmt::format(
        "herd::init: MPI provides {}, but herd's background thread calls MPI while the program "
        "runs: initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let "
        "herd::init do it",
        thread_level_name(provided));
    throw Error(message);  // ~Runtime finalizes MPI if herd started it
  }

  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &runtime->rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &runtime->size_), "MPI_Comm_size");
  check_settings_agree(config, runtime->size_);
  MPI_Comm local_comm;
  check_mpi(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, runtime->rank_, MPI_INFO_NULL,
                                &local_comm),
            "MPI_Comm_split_type");
  MPI_Comm_rank(local_comm, &runtime->local_rank_);
  MPI_Comm_size(local_comm, &runtime->local_size_);
  MPI_Comm_free(&local_comm);

  // Own communicators keep herd's messages apart from the application's and
  // the control messages apart from the data.
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &runtime->control_comm_), "MPI_Comm_dup");
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &runtime->data_comm_), "MPI_Comm_dup");

  logging::set_rank(runtime->rank_);
  logging::set_level(config.log_level);
  runtime->transport_ = std::make_unique<collectives::MpiTransport>(runtime->data_comm_);
  runtime->control_ = std::make_unique<ControlChannel>(runtime->control_comm_);
  runtime->loop_ = std::make_unique<BackgroundLoop>(config, runtime->queue_, *runtime->control_,
                                                    *runtime->transport_);
  runtime->thread_ = std::thread([loop = runtime->loop_.get()] { loop->run(); });
  HERD_LOG(kInfo,
           "started: rank {} of {}, local rank {} of {}, fusion threshold {} bytes, cycle {} ms",
           runtime->rank_, runtime->size_, runtime->local_rank_, runtime->local_size_,
           config.fusion_threshold_bytes, config.cycle_time_ms);
  return runtime;
}

void Runtime::shutdown() {
  if (stopped_) return;
  stopped_ = true;
  // Also reached from a start() that failed halfway: release what exists.
  if (loop_) loop_->request_shutdown();
  if (thread_.joinable()) thread_.join();
  loop_.reset();
  control_.reset();
  transport_.reset();
  if (control_comm_ != MPI_COMM_NULL) MPI_Comm_free(&control_comm_);
  if (data_comm_ != MPI_COMM_NULL) MPI_Comm_free(&data_comm_);
  if (owns_mpi_) MPI_Finalize();
  HERD_LOG(kInfo, "shut down");
}

Runtime::~Runtime() { shutdown(); }

Handle Runtime::allreduce_async(const std::string& name, const TensorView& input,
                                const TensorView& output, ReduceOp op, double prescale,
                                double postscale) {
  const Status valid = validate_allreduce(name, input, output, prescale, postscale);
  if (!valid.is_ok()) throw Error(valid.message());

  TensorEntry entry;
  entry.request.rank = rank_;
  entry.request.type = CollectiveType::kAllreduce;
  entry.request.name = name;
  entry.request.dtype = input.dtype;
  entry.request.op = op;
  entry.request.prescale = prescale;
  entry.request.postscale = postscale;
  entry.request.device = input.device;
  entry.request.shape = input.shape;
  entry.input = input;
  entry.output = output;
  entry.handle = std::make_shared<HandleState>(fmt::format("allreduce '{}'", name));
  Handle handle(entry.handle);
  const Status queued = queue_.push(std::move(entry));
  if (!queued.is_ok()) throw Error(queued.message());
  return handle;
}

Status validate_allreduce(const std::string& name, const TensorView& input,
                          const TensorView& output, double prescale, double postscale) {
  const std::string what = fmt::format("allreduce '{}'", name);
  if (name.empty()) return Status::error("allreduce: the tensor name is empty");
  for (const TensorView* view : {&input, &output}) {
    const char* role = view == &input ? "input" : "output";
    for (int64_t extent : view->shape) {
      if (extent < 0) {
        return Status::error(fmt::format("{}: {} shape {} has a negative extent", what, role,
                                         shape_to_string(view->shape)));
      }
    }
    if (view->data == nullptr && view->num_elements() > 0) {
      return Status::error(fmt::format("{}: {} data is null but shape {} has {} elements", what,
                                       role, shape_to_string(view->shape), view->num_elements()));
    }
    if (view->device.type != DeviceType::kCPU) {
      return Status::error(fmt::format("{}: {} is on {}, but this build of herd has no GPU support",
                                       what, role, to_string(view->device)));
    }
  }
  if (input.dtype != output.dtype) {
    return Status::error(fmt::format("{}: input dtype {} differs from output dtype {}", what,
                                     to_string(input.dtype), to_string(output.dtype)));
  }
  if (input.num_elements() != output.num_elements()) {
    return Status::error(
        fmt::format("{}: input shape {} ({} elements) differs from output shape {} ({} elements)",
                    what, shape_to_string(input.shape), input.num_elements(),
                    shape_to_string(output.shape), output.num_elements()));
  }
  if (input.data != output.data && input.num_bytes() > 0) {
    const auto* in = static_cast<const uint8_t*>(input.data);
    const auto* out = static_cast<const uint8_t*>(output.data);
    if (in < out + output.num_bytes() && out < in + input.num_bytes()) {
      return Status::error(
          fmt::format("{}: input and output overlap without being the same buffer", what));
    }
  }
  if (!std::isfinite(prescale) || !std::isfinite(postscale)) {
    return Status::error(
        fmt::format("{}: prescale {} and postscale {} must be finite", what, prescale, postscale));
  }
  return Status::ok();
}

}  // namespace herd::detail
