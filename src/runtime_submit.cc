// Runtime's submission methods: check one request on the calling application
// thread, turn it into a TensorEntry for its process set, and queue it.
#include <cmath>

#include <fmt/format.h>

#include "collectives/adasum.h"
#include "herd/error.h"
#include "ops/adasum.h"
#include "src/handle_state.h"
#include "src/request_validation.h"
#include "src/runtime.h"

namespace herd::detail {
namespace {

// The checks below look at this rank's call alone: a failed one is an
// invalid argument (ValueError in herd.torch), whatever the Status says.
void throw_if_invalid(const Status& status) {
  if (!status.is_ok()) throw Error(status.message(), ErrorKind::kInvalidArgument);
}

// Collectives that split or concatenate along the first dimension need one.
Status require_rows(const std::string& what, const TensorView& view) {
  if (!view.shape.empty()) return Status::ok();
  return Status::error(
      fmt::format("{}: needs a tensor of at least one dimension, got a scalar", what));
}

Status require_output(const std::string& what, const Tensor* output) {
  return output != nullptr ? Status::ok()
                           : Status::error(fmt::format("{}: the output tensor is null", what));
}

Status require_finite(const std::string& what, double prescale, double postscale) {
  if (std::isfinite(prescale) && std::isfinite(postscale)) return Status::ok();
  return Status::error(
      fmt::format("{}: prescale {} and postscale {} must be finite", what, prescale, postscale));
}

constexpr const char* kBarrierName = "herd.barrier";

// The fields every reducing collective carries.
void set_reduction(Request* request, ReduceOp op, double prescale, double postscale) {
  request->op = op;
  request->prescale = prescale;
  request->postscale = postscale;
}

std::string describe(CollectiveType type, const std::string& name) {
  return fmt::format("{} '{}'", to_string(type), name);
}

// What Adasum takes (collectives/adasum.h), checked when it is asked for, on
// every rank alike: a dtype other than float16/32/64 is this call's mistake;
// GPU memory and a set whose size is not a power of two are requests herd
// does not support (as in Horovod, which refuses those at the call too).
void check_adasum(const std::string& what, DataType dtype, const Device& device,
                  const ProcessSetState& state) {
  if (!ops::adasum_supports(dtype)) {
    throw invalid_argument(fmt::format(
        "{}: Adasum reduces float16, float32 and float64 tensors, not {}", what, to_string(dtype)));
  }
  if (device.type != DeviceType::kCPU) {
    throw Error(
        fmt::format("{}: Adasum runs on CPU tensors only, not on {}", what, to_string(device)),
        ErrorKind::kNotImplemented);
  }
  if (!collectives::adasum_supports_ranks(state.set_size())) {
    throw Error(fmt::format("{}: Adasum needs a process set whose size is a power of two "
                            "(1, 2, 4, 8, ...); process set {} has {} ranks",
                            what, state.id(), state.set_size()),
                ErrorKind::kNotImplemented);
  }
}

}  // namespace

void Runtime::require_usable_device(const std::string& what, const char* role,
                                    const TensorView& view) {
  if (view.device.type == DeviceType::kCPU) return;
  if (!gpu_support_) {
    throw invalid_argument(
        fmt::format("{}: {} is on {}, but this build of herd has no GPU support "
                    "(herd::cuda_built() is false; build with CUDA: docs/gpu.md)",
                    what, role, to_string(view.device)));
  }
  throw_if_invalid(gpu_support_->check_view(what, role, view));
}

TensorEntry Runtime::make_entry(CollectiveType type, const std::string& name,
                                const TensorView& view, const ProcessSetState& state) {
  if (name.empty())
    throw invalid_argument(fmt::format("{}: the tensor name is empty", to_string(type)));
  const std::string what = describe(type, name);
  require_usable_device(what, "input", view);
  if (view.device.type == DeviceType::kGPU && state.id() != 0) {
    // Each set runs on its own thread with its own NCCL communicator; NCCL
    // kernels of two communicators, issued in different orders on different
    // ranks, can wait for each other for ever.
    throw invalid_argument(
        fmt::format("{}: GPU tensors run on the global process set only, for now; this "
                    "is process set {} (ranks [{}])",
                    what, state.id(), fmt::join(state.ranks(), ",")));
  }
  TensorEntry entry;
  entry.request.rank = state.set_rank();
  entry.request.type = type;
  entry.request.name = name;
  entry.request.dtype = view.dtype;
  entry.request.device = Device{view.device.type, 0};
  entry.request.shape = view.shape;
  entry.input = view;
  entry.output = view;
  if (view.device.type == DeviceType::kGPU) {
    // On the caller's thread, right after the work that produces the data
    // was queued: the executor's stream waits for exactly that work.
    const Status recorded = gpu_support_->record_ready(view, &entry.ready_event)
                                .with_context(what + ": recording the input's ready event: ");
    if (!recorded.is_ok()) throw Error(recorded.message());
  }
  entry.handle = std::make_shared<HandleState>(what);
  return entry;
}

Handle Runtime::allreduce_async(const std::string& name, const TensorView& input,
                                const TensorView& output, ReduceOp op, double prescale,
                                double postscale, const ProcessSet& set) {
  const std::string what = describe(CollectiveType::kAllreduce, name);
  throw_if_invalid(validate_reduction(what, input, output, prescale, postscale));
  ProcessSetState& state = member_state(set, what);
  if (op == ReduceOp::kAdasum) check_adasum(what, input.dtype, input.device, state);
  TensorEntry entry = make_entry(CollectiveType::kAllreduce, name, input, state);
  require_usable_device(what, "output", output);
  set_reduction(&entry.request, op, prescale, postscale);
  entry.output = output;
  return state.submit(std::move(entry));
}

Handle Runtime::allgather_async(const std::string& name, const TensorView& input, Tensor* output,
                                const ProcessSet& set) {
  const std::string what = describe(CollectiveType::kAllgather, name);
  throw_if_invalid(validate_view(what, "input", input));
  throw_if_invalid(require_rows(what, input));
  throw_if_invalid(require_output(what, output));
  ProcessSetState& state = member_state(set, what);
  TensorEntry entry = make_entry(CollectiveType::kAllgather, name, input, state);
  entry.output_tensor = output;
  return state.submit(std::move(entry));
}

Handle Runtime::broadcast_async(const std::string& name, const TensorView& inout, int root,
                                const ProcessSet& set) {
  const std::string what = describe(CollectiveType::kBroadcast, name);
  throw_if_invalid(validate_view(what, "tensor", inout));
  if (root < 0 || root >= size_) {
    throw invalid_argument(
        fmt::format("{}: root {} is not a rank of this job (size {})", what, root, size_));
  }
  ProcessSetState& state = member_state(set, what);
  // The root is a global rank; the set's algorithms count members.
  const std::vector<int>& members = state.ranks();
  const auto at = std::lower_bound(members.begin(), members.end(), root);
  if (at == members.end() || *at != root) {
    throw invalid_argument(fmt::format("{}: root {} is not in process set {} (ranks [{}])", what,
                                       root, set.id(), fmt::join(members, ",")));
  }
  TensorEntry entry = make_entry(CollectiveType::kBroadcast, name, inout, state);
  // Carried as the global rank, so messages name it as the caller did; the
  // executor finds its position in the set.
  entry.request.root = root;
  return state.submit(std::move(entry));
}

Handle Runtime::alltoall_async(const std::string& name, const TensorView& input,
                               std::vector<int64_t> splits, Tensor* output,
                               std::vector<int64_t>* received_splits, const ProcessSet& set) {
  const std::string what = describe(CollectiveType::kAlltoall, name);
  throw_if_invalid(validate_view(what, "input", input));
  throw_if_invalid(require_rows(what, input));
  throw_if_invalid(require_output(what, output));
  ProcessSetState& state = member_state(set, what);
  throw_if_invalid(resolve_alltoall_splits(name, input, state.set_size(), &splits));
  TensorEntry entry = make_entry(CollectiveType::kAlltoall, name, input, state);
  entry.request.splits = std::move(splits);
  entry.output_tensor = output;
  entry.received_splits = received_splits;
  return state.submit(std::move(entry));
}

Handle Runtime::reducescatter_async(const std::string& name, const TensorView& input,
                                    Tensor* output, ReduceOp op, double prescale, double postscale,
                                    const ProcessSet& set) {
  const std::string what = describe(CollectiveType::kReducescatter, name);
  throw_if_invalid(validate_view(what, "input", input));
  throw_if_invalid(require_rows(what, input));
  throw_if_invalid(require_output(what, output));
  throw_if_invalid(require_finite(what, prescale, postscale));
  if (op == ReduceOp::kAdasum) {
    // As in Horovod: Adasum combines whole vectors, and a reducescatter
    // leaves each rank a part of one.
    throw Error(fmt::format("{}: reducescatter does not take Adasum; use op=Sum or op=Average "
                            "(Adasum is an allreduce)",
                            what),
                ErrorKind::kNotImplemented);
  }
  ProcessSetState& state = member_state(set, what);
  TensorEntry entry = make_entry(CollectiveType::kReducescatter, name, input, state);
  set_reduction(&entry.request, op, prescale, postscale);
  entry.output_tensor = output;
  return state.submit(std::move(entry));
}

Handle Runtime::grouped_allreduce_async(const std::vector<std::string>& names,
                                        const std::vector<TensorView>& inputs,
                                        const std::vector<TensorView>& outputs, ReduceOp op,
                                        double prescale, double postscale, const ProcessSet& set) {
  // The group travels as one request named after its members, so it is
  // negotiated, and so executed, as one unit.
  const std::string name = fmt::format("{{{}}}", fmt::join(names, ", "));
  const std::string what = describe(CollectiveType::kGroupedAllreduce, name);
  if (names.empty()) throw invalid_argument("grouped allreduce: the group has no tensors");
  if (inputs.size() != names.size() || outputs.size() != names.size()) {
    throw invalid_argument(
        fmt::format("{}: {} names, {} inputs and {} outputs; they must be as many", what,
                    names.size(), inputs.size(), outputs.size()));
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    throw_if_invalid(validate_reduction(describe(CollectiveType::kAllreduce, names[i]), inputs[i],
                                        outputs[i], prescale, postscale));
    if (inputs[i].dtype != inputs[0].dtype) {
      throw invalid_argument(fmt::format("{}: members differ in dtype: '{}' {}, '{}' {}", what,
                                         names[0], to_string(inputs[0].dtype), names[i],
                                         to_string(inputs[i].dtype)));
    }
  }
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (inputs[i].device != inputs[0].device) {
      throw invalid_argument(fmt::format("{}: members are on different devices: '{}' {}, '{}' {}",
                                         what, names[0], to_string(inputs[0].device), names[i],
                                         to_string(inputs[i].device)));
    }
    const std::string member = describe(CollectiveType::kAllreduce, names[i]);
    require_usable_device(member, "input", inputs[i]);
    require_usable_device(member, "output", outputs[i]);
  }
  ProcessSetState& state = member_state(set, what);
  if (op == ReduceOp::kAdasum) check_adasum(what, inputs[0].dtype, inputs[0].device, state);
  // One ready event, on the first member's stream: a group is produced by
  // one backward pass, on one stream.
  TensorEntry entry = make_entry(CollectiveType::kGroupedAllreduce, name, inputs[0], state);
  entry.request.shape.clear();
  for (const TensorView& input : inputs) entry.request.group_shapes.push_back(input.shape);
  set_reduction(&entry.request, op, prescale, postscale);
  entry.group_inputs = inputs;
  entry.group_outputs = outputs;
  return state.submit(std::move(entry));
}

Handle Runtime::barrier_async(const ProcessSet& set) {
  // Every barrier has the same name. A rank has at most one pending, and a
  // barrier completes on every rank in the same cycle, so the k-th barriers
  // of all ranks always meet under it, also after a barrier that failed on
  // some ranks only (one refused while ranks were joined, say), which a
  // counter in the name would have put out of step.
  ProcessSetState& state = member_state(set, "barrier");
  TensorEntry entry = make_entry(CollectiveType::kBarrier, kBarrierName, TensorView{}, state);
  entry.request.shape.clear();
  return state.submit(std::move(entry));
}

Handle Runtime::join_async(int* last_rank) {
  return member_state(ProcessSet(), "join").join(last_rank);
}

}  // namespace herd::detail
