#include "launcher/herdrun/job_process.h"

#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <optional>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/herdrun/output_relay.h"
#include "launcher/herdrun/rank_logs.h"

namespace herd::launcher {
namespace {

// How often the ranks' stderr files are read while the job runs: the order
// in which ranks' errors are seen is known to about this.
constexpr int kRankLogPollMs = 200;

// The running mpirun, for the signal handler; 0 when there is none.
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_interrupted = 0;

void pass_signal_on(int signal) {
  g_interrupted = 1;
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), signal);
}

// Installs pass_signal_on for the signals that end a job from outside, and
// puts the previous handlers back when it goes.
class SignalForwarding {
 public:
  SignalForwarding() {
    struct sigaction action {};
    action.sa_handler = &pass_signal_on;
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &action, &previous_[i]);
  }
  ~SignalForwarding() {
    for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &previous_[i], nullptr);
  }
  SignalForwarding(const SignalForwarding&) = delete;
  SignalForwarding& operator=(const SignalForwarding&) = delete;

 private:
  static constexpr std::array<int, 3> kSignals = {SIGINT, SIGTERM, SIGHUP};
  std::array<struct sigaction, 3> previous_{};
};

}  // namespace

JobResult run_job(const std::vector<std::string>& argv, const std::string& output_dir,
                  FailureReport* report) {
  int err_pipe[2];
  // Written by the child when exec fails: errno's value.
  int exec_pipe[2];
  if (::pipe(err_pipe) != 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("herdrun: pipe: ") + std::strerror(errno));
  }
  std::vector<char*> args;
  for (const auto& word : argv) args.push_back(const_cast<char*>(word.c_str()));
  args.push_back(nullptr);

  SignalForwarding forwarding;
  g_interrupted = 0;
  const pid_t child = ::fork();
  if (child < 0) throw std::runtime_error(std::string("herdrun: fork: ") + std::strerror(errno));
  if (child == 0) {
    // herdrun ignores SIGPIPE (main.cc); mpirun gets the default back, which
    // an ignored signal would otherwise keep across exec.
    ::signal(SIGPIPE, SIG_DFL);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {err_pipe[0], err_pipe[1], exec_pipe[0]}) ::close(fd);
    ::execvp(args[0], args.data());
    const int error = errno;
    [[maybe_unused]] auto ignored = ::write(exec_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  g_child = child;
  // A signal between fork and the line above found no child to pass it on to.
  if (g_interrupted) ::kill(child, SIGTERM);
  for (int fd : {err_pipe[1], exec_pipe[1]}) ::close(fd);

  int exec_error = 0;
  ssize_t got;
  do {
    got = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (got == sizeof exec_error) {
    ::waitpid(child, nullptr, 0);
    g_child = 0;
    ::close(err_pipe[0]);
    throw std::runtime_error("herdrun: cannot run " + argv[0] + ": " + std::strerror(exec_error));
  }

  OutputRelay relay(STDERR_FILENO, report);
  std::optional<RankLogs> rank_logs;
  if (!output_dir.empty()) rank_logs.emplace(output_dir);
  pollfd fd = {err_pipe[0], POLLIN, 0};
  char buffer[1 << 16];
  auto last_rank_poll = std::chrono::steady_clock::now();
  while (true) {
    // Wakes for mpirun's stderr, and every kRankLogPollMs for the ranks'.
    const int ready = ::poll(&fd, 1, kRankLogPollMs);
    const auto now = std::chrono::steady_clock::now();
    if (rank_logs && now - last_rank_poll >= std::chrono::milliseconds(kRankLogPollMs)) {
      rank_logs->poll(report);
      last_rank_poll = now;
    }
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd.fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    relay.consume(std::string_view(buffer, static_cast<size_t>(n)));
  }
  relay.finish();
  ::close(fd.fd);

  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
  if (rank_logs) rank_logs->poll(report, /*final=*/true);
  JobResult result;
  result.interrupted = g_interrupted != 0;
  if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_status = 128 + WTERMSIG(status);
  }
  return result;
}

}  // namespace herd::launcher
