// mpirun's stderr passes through unchanged and as it comes, its lines split
// across reads reach the report whole; the ranks' stderr files are read as
// they grow, a line at a time, and a last line without a newline at the end.
#include <fstream>
#include <string>

#include <catch2/catch.hpp>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>

#include "launcher/herdrun/failure_report.h"
#include "launcher/herdrun/output_relay.h"
#include "launcher/herdrun/rank_logs.h"

namespace herd::launcher {
namespace {

std::string drain(int fd) {
  std::string text;
  char buffer[256];
  for (ssize_t n; (n = ::read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, n);
  return text;
}

TEST_CASE("mpirun's stderr passes through; its lines reach the report") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  FailureReport report;
  const std::string text =
      "warning from a rank\n-----\nmpirun noticed that process rank 1 with PID 0 on node vm "
      "exited on signal 9 (Killed).\nno newline";
  {
    OutputRelay relay(fds[1], &report);
    relay.consume(text.substr(0, 30));
    relay.consume(text.substr(30, 40));
    relay.consume(text.substr(70));
    relay.finish();
  }
  ::close(fds[1]);
  CHECK(drain(fds[0]) == text);
  ::close(fds[0]);
  CHECK(report.first_failed_rank() == 1);
  CHECK(report.summary(137).find("it was killed by signal 9 (Killed)") != std::string::npos);
}

TEST_CASE("rank_of_stderr_file") {
  CHECK(rank_of_stderr_file("/tmp/herdrun.x/1/rank.0/stderr") == 0);
  CHECK(rank_of_stderr_file("d/1/rank.12/stderr") == 12);
  CHECK(rank_of_stderr_file("d/1/rank.12/stdout") == -1);
  CHECK(rank_of_stderr_file("d/1/rank./stderr") == -1);
  CHECK(rank_of_stderr_file("d/1/rank.1x/stderr") == -1);
  CHECK(rank_of_stderr_file("d/1/node.1/stderr") == -1);
}

TEST_CASE("the ranks' stderr files are read as they grow") {
  char pattern[] = "/tmp/test_rank_logs.XXXXXX";
  REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::filesystem::path root(pattern);
  std::filesystem::create_directories(root / "1" / "rank.0");
  std::filesystem::create_directories(root / "1" / "rank.1");
  auto append = [&](const char* rank, const std::string& text) {
    std::ofstream(root / "1" / rank / "stderr", std::ios::app) << text;
  };
  FailureReport report;
  RankLogs logs(root.string());
  std::ofstream(root / "1" / "rank.0" / "stdout") << "Error: stdout is not read\n";
  append("rank.0", "loading\n");
  logs.poll(&report);
  CHECK_FALSE(report.first_failed_rank());

  append("rank.1", "Error: disk ");  // half a line: not yet an error line
  logs.poll(&report);
  CHECK_FALSE(report.first_failed_rank());
  append("rank.1", "full\n");
  append("rank.0", "Error: later");  // no newline until the end
  logs.poll(&report);
  CHECK(report.first_failed_rank() == 1);
  CHECK(report.first_error_line(1) == "Error: disk full");
  CHECK(report.first_error_line(0) == "loading");
  logs.poll(&report, /*final=*/true);
  CHECK(report.first_error_line(0) == "Error: later");
  CHECK(report.first_failed_rank() == 1);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace herd::launcher
