// Passes mpirun's output on to herdrun's own stdout or stderr line by line,
// with --tag-output's rank labels taken off, and shows every line to the
// failure report.
#pragma once

#include <string>
#include <string_view>

#include "launcher/herdrun/failure_report.h"

namespace herd::launcher {

class OutputRelay {
 public:
  // `fd`: where the lines go (1 or 2); `report` outlives the relay.
  OutputRelay(int fd, FailureReport* report) : fd_(fd), report_(report) {}

  // Bytes as read from mpirun's pipe; complete lines go out at once.
  void consume(std::string_view bytes);
  // The pipe has closed: a last line without its newline goes out too.
  void finish();

 private:
  void emit(std::string_view line, bool newline);

  int fd_;
  FailureReport* report_;
  std::string partial_;
};

// Writes all of `bytes` to `fd`, retrying short writes and EINTR; errors
// (a closed terminal) are dropped, so that the job is not disturbed.
void write_all(int fd, std::string_view bytes);

}  // namespace herd::launcher
