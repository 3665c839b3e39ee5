#include "launcher/herdrun/job_process.h"

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/herdrun/output_relay.h"

namespace herd::launcher {
namespace {

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

JobResult run_job(const std::vector<std::string>& argv, FailureReport* report) {
  int out_pipe[2];
  int err_pipe[2];
  // Written by the child when exec fails: errno's value.
  int exec_pipe[2];
  if (::pipe(out_pipe) != 0 || ::pipe(err_pipe) != 0 || ::pipe2(exec_pipe, O_CLOEXEC) != 0) {
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
    ::dup2(out_pipe[1], STDOUT_FILENO);
    ::dup2(err_pipe[1], STDERR_FILENO);
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0]}) ::close(fd);
    ::execvp(args[0], args.data());
    const int error = errno;
    [[maybe_unused]] auto ignored = ::write(exec_pipe[1], &error, sizeof error);
    ::_exit(127);
  }
  g_child = child;
  for (int fd : {out_pipe[1], err_pipe[1], exec_pipe[1]}) ::close(fd);

  int exec_error = 0;
  ssize_t got;
  do {
    got = ::read(exec_pipe[0], &exec_error, sizeof exec_error);
  } while (got < 0 && errno == EINTR);
  ::close(exec_pipe[0]);
  if (got == sizeof exec_error) {
    ::waitpid(child, nullptr, 0);
    g_child = 0;
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    throw std::runtime_error("herdrun: cannot run " + argv[0] + ": " + std::strerror(exec_error));
  }

  OutputRelay out(STDOUT_FILENO, report);
  OutputRelay err(STDERR_FILENO, report);
  std::array<pollfd, 2> fds = {{{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}}};
  std::array<OutputRelay*, 2> relays = {&out, &err};
  int open = 2;
  char buffer[1 << 16];
  while (open > 0) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        relays[i]->finish();
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open;
        continue;
      }
      relays[i]->consume(std::string_view(buffer, static_cast<size_t>(n)));
    }
  }
  for (const auto& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }

  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  g_child = 0;
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
