// Passes mpirun's stderr on to herdrun's own as it comes, and shows each of
// its lines to the failure report, which looks there for mpirun's account of
// the first rank that failed. (The ranks' stdout reaches herdrun's stdout
// straight from mpirun.)
#pragma once

#include <string>
#include <string_view>

#include "launcher/herdrun/failure_report.h"

namespace herd::launcher {

class OutputRelay {
 public:
  // `fd`: where the bytes go; `report` outlives the relay.
  OutputRelay(int fd, FailureReport* report) : fd_(fd), report_(report) {}

  // Bytes as read from mpirun's pipe: written out at once, complete lines
  // shown to the report.
  void consume(std::string_view bytes);
  // The pipe has closed: a last line without its newline is shown too.
  void finish();

 private:
  int fd_;
  FailureReport* report_;
  std::string partial_;  // the start of a line not yet complete
};

// Writes all of `bytes` to `fd`, retrying short writes and EINTR; errors
// (a closed terminal) are dropped, so that the job is not disturbed.
void write_all(int fd, std::string_view bytes);

}  // namespace herd::launcher
