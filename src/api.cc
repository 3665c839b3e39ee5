// The public entry points of include/herd/herd.h: argument checks, the one
// process-wide Runtime, and the translation of internal Status to herd::Error.
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/device_memory.h"
#include "herd/herd.h"
#include "herd/parameter_server.h"
#include "src/blocking_call.h"
#include "src/config.h"
#include "src/handle_state.h"
#include "src/ps_link.h"
#include "src/runtime.h"

namespace herd {
namespace {

// The C-style API needs one process-wide runtime; submissions share the lock,
// init and shutdown take it alone so the runtime never dies under a caller.
std::shared_mutex g_runtime_mutex;
// Destroyed at the end of the process: a runtime still here then shuts
// down as one the program left without herd::shutdown (Runtime::ShutdownCause).
std::unique_ptr<detail::Runtime> g_runtime;
bool g_was_shut_down = false;

[[noreturn]] void throw_not_running(const char* call) {
  throw Error(std::string("herd::") + call +
                  (g_was_shut_down ? ": herd has been shut down"
                                   : ": herd is not initialized; call herd::init() first"),
              ErrorKind::kInvalidArgument);
}

detail::Runtime& running(const char* call) {
  if (!g_runtime) throw_not_running(call);
  return *g_runtime;
}

// A blocking call: submits as one (blocking_call.h), so that the waiting
// thread runs the cycle itself instead of handing it to the background
// thread, then waits.
template <typename Submit>
void submit_and_wait(Submit&& submit) {
  Handle handle;
  {
    detail::BlockingCallScope scope;
    handle = submit();
  }
  wait(handle);
}

}  // namespace

void init() {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  if (g_runtime) throw Error("herd::init: herd is already initialized");
  detail::Config config;
  // A bad value does not throw here: every rank must fail, not this one
  // alone, so Runtime::start exchanges the ranks' results once MPI runs
  // (config keeps its defaults meanwhile).
  detail::ConfigNotes notes;
  const Status read = detail::read_config(detail::process_environment(), &config, &notes);
  std::vector<std::string> warnings =
      detail::unknown_variable_warnings(detail::herd_variables_in_environment());
  warnings.insert(warnings.end(), notes.warnings.begin(), notes.warnings.end());
  std::unique_ptr<detail::Runtime> runtime =
      detail::Runtime::start(config, read, warnings, notes.choices);
  if (runtime->is_server()) {
    // A parameter server serves until the workers are done, then the
    // process ends: nothing of herd is left for the program to call.
    lock.unlock();
    runtime->serve_and_exit();
  }
  g_runtime = std::move(runtime);
  g_was_shut_down = false;
}

void shutdown() {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  running("shutdown").shutdown(detail::Runtime::ShutdownCause::kCall);
  g_runtime.reset();
  g_was_shut_down = true;
}

void fail(const std::string& reason) {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  detail::Runtime& runtime = running("fail");
  if (reason.empty()) {
    throw Error("herd::fail: the reason is empty; say what went wrong",
                ErrorKind::kInvalidArgument);
  }
  runtime.fail(reason);
  g_runtime.reset();
  g_was_shut_down = true;
}

void shutdown_at_exit() {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  if (!g_runtime) return;
  g_runtime->shutdown(detail::Runtime::ShutdownCause::kExit);
  g_runtime.reset();
  g_was_shut_down = true;
}

bool is_initialized() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return g_runtime != nullptr;
}

int rank() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("rank").rank();
}

int size() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("size").size();
}

int local_rank() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("local_rank").local_rank();
}

int local_size() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("local_size").local_size();
}

int cross_rank() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("cross_rank").cross_rank();
}

int cross_size() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("cross_size").cross_size();
}

bool is_homogeneous() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("is_homogeneous").is_homogeneous();
}

bool mpi_threads_supported() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("mpi_threads_supported").mpi_threads_supported();
}

bool cuda_built() { return detail::cuda_built(); }

bool nccl_built() { return detail::nccl_built(); }
int nccl_version_code() { return detail::nccl_version_code(); }

Handle allreduce_async(const std::string& name, TensorView input, TensorView output, ReduceOp op,
                       double prescale, double postscale, const ProcessSet& process_set) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("allreduce_async")
      .allreduce_async(name, input, output, op, prescale, postscale, process_set);
}

void allreduce(const std::string& name, TensorView input, TensorView output, ReduceOp op,
               double prescale, double postscale, const ProcessSet& process_set) {
  submit_and_wait([&] {
    return allreduce_async(name, std::move(input), std::move(output), op, prescale, postscale,
                           process_set);
  });
}

Handle allgather_async(const std::string& name, TensorView input, Tensor* output,
                       const ProcessSet& process_set) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("allgather_async").allgather_async(name, input, output, process_set);
}

void allgather(const std::string& name, TensorView input, Tensor* output,
               const ProcessSet& process_set) {
  submit_and_wait([&] { return allgather_async(name, std::move(input), output, process_set); });
}

Handle broadcast_async(const std::string& name, TensorView inout, int root,
                       const ProcessSet& process_set) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("broadcast_async").broadcast_async(name, inout, root, process_set);
}

void broadcast(const std::string& name, TensorView inout, int root, const ProcessSet& process_set) {
  submit_and_wait([&] { return broadcast_async(name, std::move(inout), root, process_set); });
}

Handle alltoall_async(const std::string& name, TensorView input, std::vector<int64_t> splits,
                      Tensor* output, std::vector<int64_t>* received_splits,
                      const ProcessSet& process_set) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("alltoall_async")
      .alltoall_async(name, input, std::move(splits), output, received_splits, process_set);
}

void alltoall(const std::string& name, TensorView input, std::vector<int64_t> splits,
              Tensor* output, std::vector<int64_t>* received_splits,
              const ProcessSet& process_set) {
  submit_and_wait([&] {
    return alltoall_async(name, std::move(input), std::move(splits), output, received_splits,
                          process_set);
  });
}

Handle reducescatter_async(const std::string& name, TensorView input, Tensor* output, ReduceOp op,
                           double prescale, double postscale, const ProcessSet& process_set) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("reducescatter_async")
      .reducescatter_async(name, input, output, op, prescale, postscale, process_set);
}

void reducescatter(const std::string& name, TensorView input, Tensor* output, ReduceOp op,
                   double prescale, double postscale, const ProcessSet& process_set) {
  submit_and_wait([&] {
    return reducescatter_async(name, std::move(input), output, op, prescale, postscale,
                               process_set);
  });
}

Handle grouped_allreduce_async(const std::vector<std::string>& names,
                               const std::vector<TensorView>& inputs,
                               const std::vector<TensorView>& outputs, ReduceOp op, double prescale,
                               double postscale, const ProcessSet& process_set) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("grouped_allreduce_async")
      .grouped_allreduce_async(names, inputs, outputs, op, prescale, postscale, process_set);
}

void grouped_allreduce(const std::vector<std::string>& names, const std::vector<TensorView>& inputs,
                       const std::vector<TensorView>& outputs, ReduceOp op, double prescale,
                       double postscale, const ProcessSet& process_set) {
  submit_and_wait([&] {
    return grouped_allreduce_async(names, inputs, outputs, op, prescale, postscale, process_set);
  });
}

void barrier(const ProcessSet& process_set) {
  submit_and_wait([&] {
    std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
    return running("barrier").barrier_async(process_set);
  });
}

int join() {
  int last_rank = -1;
  Handle handle;
  {
    std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
    handle = running("join").join_async(&last_rank);
  }
  wait(handle);
  return last_rank;
}

// Set management is collective and changes the runtime's tables: it runs
// alone, with no submission in flight on this rank.
ProcessSet add_process_set(std::vector<int> ranks) {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("add_process_set").add_process_set(std::move(ranks));
}

void remove_process_set(const ProcessSet& process_set) {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  running("remove_process_set").remove_process_set(process_set);
}

std::vector<ProcessSet> process_sets() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("process_sets").process_sets();
}

ProcessSet global_process_set() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("global_process_set").global_process_set();
}

void start_timeline(const std::string& path, bool mark_cycles) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  running("start_timeline").start_timeline(path, mark_cycles);
}

void stop_timeline() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  running("stop_timeline").stop_timeline();
}

bool poll(const Handle& handle) {
  if (!handle.valid()) throw Error("herd::poll: the handle refers to no operation");
  return handle.state()->done();
}

void wait(const Handle& handle) {
  if (!handle.valid()) throw Error("herd::wait: the handle refers to no operation");
  const Status status = handle.state()->wait();
  if (!status.is_ok()) {
    throw Error(detail::name_the_rank_that_stopped(status.message()), status.kind());
  }
}

namespace ps {
namespace {

// The worker's link to the servers; throws when there is none.
detail::WorkerLink& worker_link(const char* call) {
  detail::WorkerLink* link = running(call).worker_link();
  if (link == nullptr) {
    throw Error(
        fmt::format("herd::ps::{}: this job has no parameter servers (HERD_NUM_SERVERS=0)", call));
  }
  return *link;
}

}  // namespace

Layout layout() {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("ps::layout").layout();
}

int64_t send_request(int server, Message request) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return worker_link("send_request").send(server, std::move(request));
}

Message wait_reply(int64_t id, const std::string& what) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return worker_link("wait_reply").wait(id, what);
}

void set_request_handler_factory(RequestHandlerFactory factory) {
  detail::register_request_handler_factory(factory);
}

}  // namespace ps
}  // namespace herd
