// Runs one launch of the job: mpirun as a child process, its stdout and
// stderr relayed (output_relay.h) until both close, SIGINT, SIGTERM and
// SIGHUP passed on to it.
#pragma once

#include <string>
#include <vector>

#include "launcher/herdrun/failure_report.h"

namespace herd::launcher {

struct JobResult {
  int exit_status = 0;       // mpirun's; 128+S when a signal S ended it
  bool interrupted = false;  // herdrun itself got SIGINT, SIGTERM or SIGHUP
};

// Starts argv[0] (looked up on PATH) with `argv` and waits for it. Throws
// std::runtime_error naming the program when it cannot be started.
JobResult run_job(const std::vector<std::string>& argv, FailureReport* report);

}  // namespace herd::launcher
