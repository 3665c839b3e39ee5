// A parameter server that dies or stops answering: every worker's next
// dist_async call fails, naming the server's rank, host and pid, within
// HERD_COLLECTIVE_TIMEOUT (or at once, for a process found gone); none
// hangs.
//
// Usage: test_kvstore_async_fault DIR kill|stop|early-exit
//
// The last rank of the job (the last server) is the victim. Before herd::init
// it writes its pid to DIR/server.pid and starts a thread that waits for
// DIR/fault, then kills its own process (kill) or stops it (stop, SIGSTOP).
// Worker 0 writes DIR/fault once every worker has had an exact result; the
// workers then wait until the victim is dead or stopped and push to a key
// the victim holds. Each prints "worker R passed" or "worker R FAILED: ...";
// in stop mode worker 0 kills the stopped server at the end, so the job ends.
// mpiexec runs with --enable-recovery, and ctest reads the lines (the job's
// exit status reports the dead server).
//
// early-exit: no server fails; worker 0 returns from main without
// herd::shutdown. Worker 1's next barrier fails naming it, as for any rank,
// and the servers, told by worker 0's exit, end with the job.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "herd/herd.h"
#include "herd/kvstore.h"
#include "herd/parameter_server.h"

namespace {

using Clock = std::chrono::steady_clock;

bool file_exists(const std::string& path) {
  struct stat info {};
  return stat(path.c_str(), &info) == 0;
}

// 'T' while stopped, 'X' or gone once dead.
char process_state(int pid) {
  std::ifstream stat_file("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat_file, text)) return 'X';
  const std::size_t close = text.rfind(')');
  return close + 2 < text.size() ? text[close + 2] : '?';
}

void become_victim(const std::string& dir, bool stop) {
  const std::string fault = dir + "/fault";
  std::remove(fault.c_str());
  {
    std::ofstream pid_file(dir + "/server.pid.tmp");
    pid_file << getpid() << "\n";
  }
  std::rename((dir + "/server.pid.tmp").c_str(), (dir + "/server.pid").c_str());
  std::thread([fault, stop] {
    while (!file_exists(fault)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (stop) {
      kill(getpid(), SIGSTOP);
    } else {
      kill(getpid(), SIGKILL);
    }
  }).detach();
}

// Worker 0 leaves without herd::shutdown after an exact pull; worker 1 then
// waits in a barrier that must fail naming worker 0.
int run_early_exit() {
  const int rank = herd::rank();
  auto store = herd::kv::create("dist_async");
  std::vector<float> value(4, 3.0f), out(4);
  store->init(0, herd::TensorView{value.data(), herd::DataType::kFloat32, {4}});
  store->pull(0, herd::TensorView{out.data(), herd::DataType::kFloat32, {4}});
  std::string failure = out == value ? "" : "the pull was not exact";
  if (rank == 0) {
    std::printf("worker 0 %s\n", failure.empty() ? "passed" : ("FAILED: " + failure).c_str());
    std::fflush(stdout);
    return 0;  // herd's static destructor shuts down, telling the others
  }
  try {
    store->barrier();
    failure = "the barrier with a worker that left did not fail";
  } catch (const herd::Error& error) {
    const std::string message = error.what();
    std::printf("worker %d: error: %s\n", rank, message.c_str());
    if (message.find("rank 0 (host ") == std::string::npos ||
        message.find("exited without herd::shutdown") == std::string::npos) {
      failure = "the message does not name rank 0's exit";
    }
  }
  store.reset();
  herd::shutdown();
  std::printf("worker %d %s\n", rank, failure.empty() ? "passed" : ("FAILED: " + failure).c_str());
  std::fflush(stdout);
  return failure.empty() ? 0 : 1;
}

int run_worker(const std::string& dir, bool stop) {
  const int rank = herd::rank();
  const herd::ps::Layout layout = herd::ps::layout();
  const int victim = layout.num_servers - 1;
  // Key 1 lives on server 9973 mod S: 0 of 1, 1 of 2: the last server.
  const herd::kv::Key key(1);
  std::string failure;
  auto store = herd::kv::create("dist_async");
  std::vector<float> value(16, 2.0f), grad(16, 1.0f), out(16);
  const herd::TensorView value_view{value.data(), herd::DataType::kFloat32, {16}};
  const herd::TensorView grad_view{grad.data(), herd::DataType::kFloat32, {16}};
  const herd::TensorView out_view{out.data(), herd::DataType::kFloat32, {16}};
  store->init(key, value_view);
  herd::kv::OptimizerConfig sgd;
  sgd.sgd.lr = 1.0;
  store->set_optimizer(sgd);
  store->barrier();
  store->pull(key, out_view);
  if (out[0] != 2.0f) failure = "the first pull was not exact";
  store->barrier();

  int pid = 0;
  {
    std::ifstream pid_file(dir + "/server.pid");
    pid_file >> pid;
  }
  if (rank == 0) std::ofstream(dir + "/fault") << "now\n";
  const Clock::time_point asked = Clock::now();
  for (;;) {
    const char state = process_state(pid);
    if (stop ? state == 'T' : (state == 'X' || state == 'Z')) break;
    if (Clock::now() - asked > std::chrono::seconds(20)) {
      failure = "the server never " + std::string(stop ? "stopped" : "died");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  char host[256] = {};
  gethostname(host, sizeof host - 1);
  const std::string named = "parameter server " + std::to_string(victim) + " (rank " +
                            std::to_string(layout.server_rank(victim)) + " (host " + host +
                            ", pid " + std::to_string(pid) + "))";
  const double timeout = std::atof(std::getenv("HERD_COLLECTIVE_TIMEOUT"));
  const double bound = stop ? timeout + 8.0 : 8.0;
  const Clock::time_point started = Clock::now();
  try {
    store->push(key, grad_view);
    store->pull(key, out_view);
    if (failure.empty()) failure = "the push to the dead server did not fail";
  } catch (const herd::Error& error) {
    const double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    const std::string message = error.what();
    std::printf("worker %d: error after %.2f s: %s\n", rank, seconds, message.c_str());
    if (message.find(named) == std::string::npos && failure.empty())
      failure = "the message does not name " + named;
    if (stop && message.find("HERD_COLLECTIVE_TIMEOUT") == std::string::npos && failure.empty())
      failure = "the message does not name HERD_COLLECTIVE_TIMEOUT";
    if (seconds > bound && failure.empty())
      failure = "it failed after " + std::to_string(seconds) + " s, over " + std::to_string(bound);
  }
  // The next call fails at once too: herd cannot continue after the fault.
  const Clock::time_point again = Clock::now();
  try {
    store->pull(key, out_view);
    if (failure.empty()) failure = "a pull after the failure succeeded";
  } catch (const herd::Error&) {
    if (Clock::now() - again > std::chrono::seconds(2) && failure.empty())
      failure = "the call after the failure did not fail at once";
  }
  if (stop && rank == 0) kill(pid, SIGKILL);
  store.reset();
  herd::shutdown();
  if (failure.empty()) {
    std::printf("worker %d passed\n", rank);
  } else {
    std::printf("worker %d FAILED: %s\n", rank, failure.c_str());
  }
  std::fflush(stdout);
  return failure.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: test_kvstore_async_fault DIR kill|stop|early-exit\n");
    return 2;
  }
  const std::string dir = argv[1];
  const std::string mode = argv[2];
  const bool stop = mode == "stop";
  if (mode == "early-exit") {
    herd::init();
    return run_early_exit();
  }
  mkdir(dir.c_str(), 0755);
  // The victim is known before herd::init, which on a server never returns.
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (rank != nullptr && size != nullptr && std::atoi(rank) == std::atoi(size) - 1) {
    become_victim(dir, stop);
  }
  herd::init();
  return run_worker(dir, stop);
}
