// The relay of mpirun's output: lines split across reads arrive whole, the
// rank labels are gone from what the user sees, mpirun's own lines pass
// unchanged, and a last line without a newline is not lost.
#include <string>

#include <catch2/catch.hpp>
#include <unistd.h>

#include "launcher/herdrun/failure_report.h"
#include "launcher/herdrun/output_relay.h"

namespace herd::launcher {
namespace {

std::string drain(int fd) {
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

TEST_CASE("the relay passes whole lines on without their labels") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  FailureReport report;
  {
    OutputRelay relay(fds[1], &report);
    relay.consume("[1,0]<stdout>:hel");
    relay.consume("lo\n[1,1]<stderr>:Error: bad");
    relay.consume(
        " input\n-----\nmpirun noticed that process rank 1 with PID 0 on node vm "
        "exited on signal 9 (Killed).\n[1,0]<stdout>:no newline");
    relay.finish();
  }
  ::close(fds[1]);
  CHECK(drain(fds[0]) ==
        "hello\nError: bad input\n-----\nmpirun noticed that process rank 1 with PID 0 on node "
        "vm exited on signal 9 (Killed).\nno newline");
  ::close(fds[0]);
  CHECK(report.first_failed_rank() == 1);
  CHECK(report.first_error_line(1) == "Error: bad input");
}

}  // namespace
}  // namespace herd::launcher
