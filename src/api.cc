// The public entry points of include/herd/herd.h: argument checks, the one
// process-wide Runtime, and the translation of internal Status to herd::Error.
#include <memory>
#include <mutex>
#include <shared_mutex>

#include "herd/herd.h"
#include "src/config.h"
#include "src/handle_state.h"
#include "src/runtime.h"

namespace herd {
namespace {

// The C-style API needs one process-wide runtime; submissions share the lock,
// init and shutdown take it alone so the runtime never dies under a caller.
std::shared_mutex g_runtime_mutex;
std::unique_ptr<detail::Runtime> g_runtime;
bool g_was_shut_down = false;

[[noreturn]] void throw_not_running(const char* call) {
  throw Error(std::string("herd::") + call +
              (g_was_shut_down ? ": herd has been shut down"
                               : ": herd is not initialized; call herd::init() first"));
}

detail::Runtime& running(const char* call) {
  if (!g_runtime) throw_not_running(call);
  return *g_runtime;
}

}  // namespace

void init() {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  if (g_runtime) throw Error("herd::init: herd is already initialized");
  detail::Config config;
  const Status read = detail::read_config(detail::process_environment(), &config);
  if (!read.is_ok()) throw Error("herd::init: " + read.message());
  g_runtime = detail::Runtime::start(config);
  g_was_shut_down = false;
}

void shutdown() {
  std::unique_lock<std::shared_mutex> lock(g_runtime_mutex);
  running("shutdown").shutdown();
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

Handle allreduce_async(const std::string& name, TensorView input, TensorView output, ReduceOp op,
                       double prescale, double postscale) {
  std::shared_lock<std::shared_mutex> lock(g_runtime_mutex);
  return running("allreduce_async").allreduce_async(name, input, output, op, prescale, postscale);
}

void allreduce(const std::string& name, TensorView input, TensorView output, ReduceOp op,
               double prescale, double postscale) {
  wait(allreduce_async(name, std::move(input), std::move(output), op, prescale, postscale));
}

bool poll(const Handle& handle) {
  if (!handle.valid()) throw Error("herd::poll: the handle refers to no operation");
  return handle.state()->done();
}

void wait(const Handle& handle) {
  if (!handle.valid()) throw Error("herd::wait: the handle refers to no operation");
  const Status status = handle.state()->wait();
  if (!status.is_ok()) throw Error(status.message());
}

}  // namespace herd
