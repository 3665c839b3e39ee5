// herdrun: starts a herd job under mpirun, with horovodrun's flags.
//
//   herdrun -np 4 [-H host1:2,host2:2 | --hostfile F] [--fusion-threshold-mb N]
//           [--cycle-time-ms N] [--timeline-filename F] [--autotune] ...
//           [--max-restarts N] [--verbose] COMMAND...
//   herdrun --check-build
//
// Each flag for herd becomes the HERD_* variable herd::init reads, forwarded
// to every rank with the HERD_* and HOROVOD_* variables of the environment
// (mpirun_command.h). When the job fails herdrun says which rank failed first
// and its first error line (failure_report.h), and relaunches it up to
// --max-restarts times with HERD_RESTART_COUNT counting the launches.
// docs/launcher.md has the flags and the exit status.
#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <stdlib.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include "herdrun_build_info.h"
#include "launcher/herdrun/failure_report.h"
#include "launcher/herdrun/hosts.h"
#include "launcher/herdrun/job_process.h"
#include "launcher/herdrun/launch_options.h"
#include "launcher/herdrun/mpirun_command.h"

extern char** environ;

namespace herd::launcher {
namespace {

// horovodrun's single-dash long flags, which CLI11 does not take: spelled
// with two dashes before parsing, up to the command.
const std::vector<std::pair<std::string, std::string>> kSingleDashFlags = {
    {"-np", "--num-proc"}, {"-hostfile", "--hostfile"}, {"-cb", "--check-build"}};

// herdrun's flags that take a value as the next word.
const std::set<std::string> kFlagsWithValue = {"--num-proc",
                                               "-H",
                                               "--hosts",
                                               "--hostfile",
                                               "--num-servers",
                                               "--mpi-args",
                                               "--binding-args",
                                               "--max-restarts",
                                               "--fusion-threshold-mb",
                                               "--cycle-time-ms",
                                               "--cache-capacity",
                                               "--timeline-filename",
                                               "--autotune-log-file",
                                               "--autotune-warmup-samples",
                                               "--autotune-steps-per-sample",
                                               "--stall-check-seconds",
                                               "--stall-check-warning-time-seconds",
                                               "--stall-check-shutdown-time-seconds",
                                               "--log-level"};

// A number that is 0 or more, saying so in words (CLI11's own check prints
// the largest double).
const CLI::Validator kNonNegative(
    [](std::string& text) {
      char* end = nullptr;
      const double value = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end != '\0' || !(value >= 0)) {
        return "must be a number, 0 or more (got " + text + ")";
      }
      return std::string();
    },
    "NONNEGATIVE");

std::vector<std::string> herdrun_words(int argc, char** argv) {
  std::vector<std::string> words(argv + 1, argv + argc);
  for (size_t i = 0; i < words.size(); ++i) {
    if (words[i] == "--" || words[i].empty() || words[i][0] != '-') break;  // the command
    for (const auto& [single, dashed] : kSingleDashFlags) {
      if (words[i] == single) words[i] = dashed;
    }
    if (kFlagsWithValue.count(words[i])) ++i;
  }
  return words;
}

Environment current_environment() {
  Environment environment;
  for (char** entry = environ; *entry != nullptr; ++entry) {
    const std::string text(*entry);
    const auto equals = text.find('=');
    if (equals == std::string::npos) continue;
    environment.emplace_back(text.substr(0, equals), text.substr(equals + 1));
  }
  return environment;
}

// The cores Open MPI counts as slots on this machine: physical cores (a
// hardware thread's sibling is no slot of its own), from sysfs; the online
// processors where sysfs says nothing.
int machine_cores() {
  std::set<std::pair<std::string, std::string>> cores;
  const long processors = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (long cpu = 0; cpu < processors; ++cpu) {
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::ifstream package(topology + "physical_package_id");
    std::ifstream core(topology + "core_id");
    std::string package_id, core_id;
    if (!(package >> package_id) || !(core >> core_id)) return processors > 0 ? processors : 1;
    cores.emplace(package_id, core_id);
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

std::string or_none(const char* text, const std::string& none) {
  return *text ? std::string(text) : none;
}

void print_check_build() {
  namespace info = build_info;
  std::string threads;
  const std::string multiple = info::kMpiThreadMultiple;
  if (multiple == "yes") {
    threads = "MPI_THREAD_MULTIPLE supported (herd needs it)";
  } else if (multiple == "no") {
    threads = "MPI_THREAD_MULTIPLE NOT supported: herd::init will refuse this MPI";
  } else {
    threads = "not known at build time (herd::init checks for MPI_THREAD_MULTIPLE)";
  }
  std::string mpi = or_none(info::kMpiImplementation, "an MPI whose launcher gave no version");
  if (*info::kMpiVersion) mpi += std::string(" ") + info::kMpiVersion;
  std::string python = "no";
  if (*info::kPythonVersion) {
    python =
        std::string("yes (Python ") + info::kPythonVersion + ", " + info::kPythonExecutable + ")";
  }
  std::printf(
      "herd v%s was built with:\n"
      "  MPI:              %s (MPI standard %s, %s)\n"
      "  MPI thread level: %s\n"
      "  CUDA:             %s\n"
      "  NCCL:             %s\n"
      "  Python module:    %s\n"
      "  PyTorch:          %s\n",
      info::kHerdVersion, mpi.c_str(), or_none(info::kMpiStandard, "?").c_str(), info::kMpiexec,
      threads.c_str(), or_none(info::kCudaVersion, "no").c_str(),
      or_none(info::kNcclVersion, "no").c_str(), python.c_str(),
      or_none(info::kTorchVersion, "no").c_str());
}

// A fresh directory for one launch's copies of the ranks' output
// (--output-filename), removed with everything in it when the launch ends.
// Under $TMPDIR, else /tmp; empty (no copies, so no error lines in the
// failure summary) when it cannot be made, which herdrun says.
class ScratchDirectory {
 public:
  ScratchDirectory() {
    const char* tmpdir = std::getenv("TMPDIR");
    std::string pattern = std::string(tmpdir && *tmpdir ? tmpdir : "/tmp") + "/herdrun.XXXXXX";
    if (::mkdtemp(pattern.data()) != nullptr) {
      path_ = pattern;
    } else {
      std::cerr << "herdrun: cannot make a directory " << pattern << " (" << std::strerror(errno)
                << "); the failure summary will lack the ranks' error lines\n";
    }
  }
  ~ScratchDirectory() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  ScratchDirectory(const ScratchDirectory&) = delete;
  ScratchDirectory& operator=(const ScratchDirectory&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The failure summary without its "herdrun: " lead, for a restart line.
std::string without_lead(const std::string& summary) {
  const std::string lead = "herdrun: ";
  return summary.rfind(lead, 0) == 0 ? summary.substr(lead.size()) : summary;
}

int launch(const LaunchOptions& options, std::vector<Host> hosts) {
  LaunchContext context;
  context.mpirun = build_info::kMpiexec;
  context.cores = machine_cores();
  context.root = ::geteuid() == 0;
  context.environment = current_environment();
  context.hosts = std::move(hosts);
  for (int launch = 0;; ++launch) {
    context.restart_count = launch;
    const ScratchDirectory output;
    context.output_dir = output.path();
    const MpirunCommand command = build_mpirun_command(options, context);
    if (launch == 0) {
      for (const auto& note : command.notes) std::cerr << note << "\n";
    }
    if (options.verbose) std::cerr << "herdrun: " << shell_join(command.argv) << std::endl;
    FailureReport report;
    const JobResult result = run_job(command.argv, output.path(), &report);
    if (result.exit_status == 0) return 0;
    const std::string summary = report.summary(result.exit_status);
    if (result.interrupted) {
      std::cerr << "herdrun: interrupted; no restart. " << without_lead(summary) << std::endl;
      return result.exit_status;
    }
    if (launch == options.max_restarts) {
      std::cerr << summary << std::endl;
      if (options.max_restarts > 0) {
        // A line of its own: the summary ends with the rank's error line as written.
        std::cerr << "herdrun: that was the last of " << options.max_restarts + 1
                  << " launches (--max-restarts " << options.max_restarts << ")." << std::endl;
      }
      return result.exit_status;
    }
    std::cerr << "herdrun: restart " << launch + 1 << " of " << options.max_restarts << ": "
              << without_lead(summary) << std::endl;
  }
}

int run(int argc, char** argv) {
  LaunchOptions options;
  bool check_build = false;
  CLI::App app{
      "herdrun: runs COMMAND as a herd job of N ranks under mpirun, with horovodrun's flags.\n"
      "Each flag for herd sets the HERD_* variable named in its help on every rank."};
  app.name("herdrun");
  app.prefix_command();
  app.set_version_flag("-v,--version", std::string("herdrun (herd) ") + build_info::kHerdVersion);
  app.add_flag("--check-build", check_build,
               "Print what this herd was built with (MPI, CUDA, NCCL, Python, PyTorch) and exit "
               "(also -cb)");
  auto* np = app.add_option("--num-proc", options.num_proc,
                            "The number of worker ranks (also -np N); required");
  auto* hosts_option =
      app.add_option("-H,--hosts", options.hosts, "Hosts and their slots: host1:2,host2:2");
  app.add_option("--hostfile", options.hostfile,
                 "A file of hosts, one \"host slots=N\" (or host:N) a line (also -hostfile)")
      ->check(CLI::ExistingFile)
      ->excludes(hosts_option);
  app.add_option("--num-servers", options.num_servers,
                 "Parameter-server ranks for dist_async KVStores, started after the -np workers "
                 "(HERD_NUM_SERVERS)")
      ->check(kNonNegative);
  app.add_flag("--oversubscribe", options.oversubscribe,
               "Let ranks outnumber the cores (added anyway when -np exceeds them)");
  app.add_option("--mpi-args", options.mpi_args,
                 "More arguments for mpirun, as one string: --mpi-args=\"--map-by ppr:2:node\"");
  app.add_option("--binding-args", options.binding_args,
                 "mpirun's binding arguments instead of \"--bind-to none --map-by slot\"");
  app.add_option("--max-restarts", options.max_restarts,
                 "Relaunch a failed job up to N times; each launch gets HERD_RESTART_COUNT "
                 "(0, 1, ...)")
      ->check(kNonNegative);
  app.add_flag("--verbose", options.verbose, "Print the mpirun command before running it");

  const char* tuning = "Tuneable parameters";
  app.add_option("--fusion-threshold-mb", options.fusion_threshold_mb,
                 "Fusion buffer size in MiB (HERD_FUSION_THRESHOLD, in bytes)")
      ->check(kNonNegative)
      ->group(tuning);
  app.add_option("--cycle-time-ms", options.cycle_time_ms,
                 "Background loop cycle time in milliseconds (HERD_CYCLE_TIME)")
      ->check(kNonNegative)
      ->group(tuning);
  app.add_option("--cache-capacity", options.cache_capacity,
                 "Response cache capacity in tensor names; 0 turns it off (HERD_CACHE_CAPACITY)")
      ->check(kNonNegative)
      ->group(tuning);
  auto* hierarchical = app.add_flag("--hierarchical-allreduce", options.hierarchical_allreduce,
                                    "Every allreduce within each machine first, then across "
                                    "(HERD_HIERARCHICAL_ALLREDUCE=1)")
                           ->group(tuning);
  app.add_flag("--no-hierarchical-allreduce", options.no_hierarchical_allreduce,
               "Never the hierarchical allreduce (HERD_HIERARCHICAL_ALLREDUCE=0)")
      ->excludes(hierarchical)
      ->group(tuning);
  auto* hierarchical_allgather =
      app.add_flag("--hierarchical-allgather", options.hierarchical_allgather,
                   "Every CPU allgather within each machine first, then across "
                   "(HERD_HIERARCHICAL_ALLGATHER=1)")
          ->group(tuning);
  app.add_flag("--no-hierarchical-allgather", options.no_hierarchical_allgather,
               "Never the hierarchical allgather (HERD_HIERARCHICAL_ALLGATHER=0)")
      ->excludes(hierarchical_allgather)
      ->group(tuning);
  app.add_flag("--autotune", options.autotune,
               "Tune the parameters while the job runs (HERD_AUTOTUNE=1)")
      ->group(tuning);
  app.add_option("--autotune-log-file", options.autotune_log_file,
                 "CSV file of the autotuning trials (HERD_AUTOTUNE_LOG)")
      ->group(tuning);
  app.add_option("--autotune-warmup-samples", options.autotune_warmup_samples,
                 "Samples autotuning drops before its first trial (HERD_AUTOTUNE_WARMUP_SAMPLES)")
      ->check(kNonNegative)
      ->group(tuning);
  app.add_option("--autotune-steps-per-sample", options.autotune_steps_per_sample,
                 "Steps one autotuning sample spans (HERD_AUTOTUNE_STEPS_PER_SAMPLE)")
      ->check(CLI::Range(int64_t{1}, int64_t{std::numeric_limits<int>::max()}))
      ->group(tuning);

  const char* timeline = "Timeline";
  app.add_option("--timeline-filename", options.timeline_filename,
                 "Write a Chrome-trace timeline here; %r stands for the rank (HERD_TIMELINE)")
      ->group(timeline);
  app.add_flag("--timeline-mark-cycles", options.timeline_mark_cycles,
               "Mark every background-loop cycle in the timeline (HERD_TIMELINE_MARK_CYCLES=1)")
      ->group(timeline);

  const char* stall = "Stall check";
  auto* no_stall = app.add_flag("--no-stall-check", options.no_stall_check,
                                "Turn the stall check and its shutdown off "
                                "(HERD_STALL_CHECK_TIME=0, HERD_STALL_SHUTDOWN_TIME=0)")
                       ->group(stall);
  app.add_option("--stall-check-seconds,--stall-check-warning-time-seconds",
                 options.stall_check_seconds,
                 "Seconds before a tensor some ranks have not submitted draws a warning "
                 "(HERD_STALL_CHECK_TIME)")
      ->check(kNonNegative)
      ->excludes(no_stall)
      ->group(stall);
  app.add_option("--stall-check-shutdown-time-seconds", options.stall_shutdown_seconds,
                 "Seconds before such a tensor fails on every rank (HERD_STALL_SHUTDOWN_TIME)")
      ->check(kNonNegative)
      ->excludes(no_stall)
      ->group(stall);
  app.add_option("--log-level", options.log_level,
                 "Least severe message herd writes: trace, debug, info, warning, error or off "
                 "(HERD_LOG_LEVEL)")
      ->transform(
          CLI::IsMember({"trace", "debug", "info", "warning", "error", "off"}, CLI::ignore_case))
      ->group("Logging");

  std::vector<std::string> words = herdrun_words(argc, argv);
  std::reverse(words.begin(), words.end());
  try {
    app.parse(words);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  if (check_build) {
    print_check_build();
    return 0;
  }
  options.command = app.remaining();
  if (!options.command.empty() && options.command.front() == "--") {
    options.command.erase(options.command.begin());
  }
  if (np->count() == 0) {
    std::cerr << "herdrun: -np N is required (the number of ranks); herdrun --help lists the "
                 "flags\n";
    return 2;
  }

  try {
    std::vector<Host> hosts;
    if (!options.hosts.empty()) hosts = parse_hosts(options.hosts);
    if (!options.hostfile.empty()) {
      std::ifstream file(options.hostfile);
      std::stringstream text;
      text << file.rdbuf();
      hosts = parse_hostfile(text.str(), options.hostfile);
    }
    return launch(options, std::move(hosts));
  } catch (const std::invalid_argument& error) {
    std::cerr << "herdrun: " << error.what() << "\n";
    return 2;
  } catch (const std::runtime_error& error) {
    std::cerr << error.what() << "\n";
    return 2;
  }
}

}  // namespace
}  // namespace herd::launcher

int main(int argc, char** argv) {
  // A closed stdout (herdrun ... | head) must not end herdrun before mpirun:
  // the relay drops what it cannot write and the job runs to its end.
  std::signal(SIGPIPE, SIG_IGN);
  return herd::launcher::run(argc, argv);
}
