// What herdrun's command line asks for (main.cc fills it through CLI11), in
// horovodrun's terms; mpirun_command.h turns it into the mpirun command.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace herd::launcher {

struct LaunchOptions {
  int num_proc = 0;      // -np: worker ranks (parameter servers come on top)
  std::string hosts;     // -H host1:2,host2:2; empty: this machine alone
  std::string hostfile;  // --hostfile; empty: none
  int num_servers = 0;   // --num-servers: dist_async server ranks after the workers
  bool oversubscribe = false;
  std::string mpi_args;      // --mpi-args: more mpirun arguments, split as a shell does
  std::string binding_args;  // --binding-args: replaces the default binding
  bool verbose = false;
  int max_restarts = 0;

  // The settings herd reads at herd::init (HERD_*), left unset when the flag
  // is not given, so that the environment's value (if any) reaches the ranks.
  std::optional<int64_t> fusion_threshold_mb;
  std::optional<double> cycle_time_ms;
  std::optional<int64_t> cache_capacity;
  bool hierarchical_allreduce = false;     // --hierarchical-allreduce
  bool no_hierarchical_allreduce = false;  // --no-hierarchical-allreduce (not with the above)
  bool hierarchical_allgather = false;     // --hierarchical-allgather
  bool no_hierarchical_allgather = false;  // --no-hierarchical-allgather (not with the above)
  std::optional<std::string> timeline_filename;
  bool timeline_mark_cycles = false;
  bool autotune = false;
  std::optional<std::string> autotune_log_file;
  std::optional<int64_t> autotune_warmup_samples;
  std::optional<int64_t> autotune_steps_per_sample;
  std::optional<double> stall_check_seconds;
  std::optional<double> stall_shutdown_seconds;
  bool no_stall_check = false;
  std::optional<std::string> log_level;

  std::vector<std::string> command;  // the program every rank runs, and its arguments
};

}  // namespace herd::launcher
