// herdrun's mpirun command line, built without side effects from the options,
// the environment and the machine, so that every combination of flags can be
// checked without a launch.
//
// The command is Open MPI's (herd is built and tested with it):
//   mpirun [--allow-run-as-root] [--oversubscribe] -np N [-H hosts]
//          --bind-to none --map-by slot | BINDING_ARGS
//          --tag-output -x NAME ... -x NAME=value ... [MPI_ARGS] COMMAND...
// --tag-output labels every line with its rank, which the failure summary
// (failure_report.h) needs; herdrun takes the labels off again before the
// lines reach the user.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "launcher/herdrun/hosts.h"
#include "launcher/herdrun/launch_options.h"

namespace herd::launcher {

using Environment = std::vector<std::pair<std::string, std::string>>;

// What the command depends on besides the options.
struct LaunchContext {
  std::string mpirun = "mpirun";  // the program
  int cores = 1;                  // this machine's, for the oversubscription check
  bool root = false;              // running as root (Open MPI refuses unless told)
  Environment environment;        // herdrun's own environment
  std::vector<Host> hosts;        // from -H or --hostfile; empty: this machine
  int restart_count = 0;          // HERD_RESTART_COUNT of this launch
};

struct MpirunCommand {
  std::vector<std::string> argv;
  std::vector<std::string> notes;  // what herdrun decided for the user, one line each
};

// The HERD_* variables the options set, in a fixed order: the fusion
// threshold in bytes, the cycle time, the stall check's times, ...
Environment herd_settings(const LaunchOptions& options);

// The whole command. More ranks than cores (or than the hosts' slots) adds
// --oversubscribe and a note saying so. Throws std::invalid_argument when
// there is no command, -np is below 1 or --mpi-args does not split.
MpirunCommand build_mpirun_command(const LaunchOptions& options, const LaunchContext& context);

// Splits `text` into words as a POSIX shell does for quotes and backslashes
// (no expansions). Throws std::invalid_argument on an unterminated quote.
std::vector<std::string> split_words(const std::string& text);

// `argv` as one line a shell would read back into the same words.
std::string shell_join(const std::vector<std::string>& argv);

}  // namespace herd::launcher
