// Config: every HERD_* setting, read from the environment in one place.
//
// read_config() is the only code in herd that reads setting values from the
// environment, herd's HERD_* variables and the aliases other frameworks' jobs
// set (HOROVOD_FUSION_THRESHOLD for HERD_FUSION_THRESHOLD, ...), and the
// HOROVOD_* variables herd cannot honour, to warn about them
// (herd_variables_in_environment lists the HERD_* names, for the
// unknown-variable warning); herd::init calls it once, before MPI starts, and
// once MPI runs the ranks exchange its result, so a bad value on any rank
// fails init on every rank with a message naming the rank, the variable and
// the value. Each setting is declared once
// in a table (config_settings.cc) with its variable, default and documentation, which
// docs/configuration.md mirrors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/logging.h"
#include "common/status.h"

namespace herd::detail {

// How GPU tensors are reduced: NCCL on the device, or MPI through pinned host
// memory (the only way in a build without NCCL).
enum class GpuAllreduce {
  kNccl,
  kMpi,
};

// Whether the shared-memory allreduce may copy once between processes
// (collectives/shm/shm_allreduce.h): where the ranks can read each other's
// memory, or required, or never.
enum class ShmSingleCopy {
  kAuto,
  kOn,
  kOff,
};

// Which algorithm a CPU allreduce runs (HERD_ALLREDUCE_ALGORITHM): chosen by
// measurement per size class (src/allreduce_chooser.h), or fixed.
enum class AllreduceAlgorithmSetting {
  kAuto,
  kShm,  // where the shared-memory group serves the size; else by the size threshold
  kRing,
  kRecursiveDoubling,
};

// Whether allreduces run hierarchically (HERD_HIERARCHICAL_ALLREDUCE): inside
// each host first, then across hosts. The enumerators' values are the
// variable's digits.
enum class HierarchicalAllreduce {
  kOff = 0,
  kOn = 1,
  // CPU: where the process set's layout allows it and the bits stay those of
  // the flat algorithms, chosen by size or measured like the others; GPU: off.
  kAuto = 2,
};

// Whether CPU allgathers run hierarchically (HERD_HIERARCHICAL_ALLGATHER):
// inside each host first, then across hosts. The enumerators' values are the
// variable's digits.
enum class HierarchicalAllgather {
  kOff = 0,
  kOn = 1,
  // Where the process set's layout allows it, from
  // kHierarchicalAllgatherMinBytes of output up (src/collective_executor.h).
  kAuto = 2,
};

struct Config {
  // HERD_FUSION_THRESHOLD: most bytes packed into one fusion buffer; 0 turns
  // fusion off (every tensor is reduced on its own).
  int64_t fusion_threshold_bytes = 4 * 1024 * 1024;
  // HERD_FUSION_MAX_TENSOR_BYTES: a tensor larger than this is reduced on its
  // own, straight from its input to its output, instead of being copied into
  // and out of the fusion buffer; 0: no limit.
  int64_t fusion_max_tensor_bytes = 256 * 1024;
  // HERD_CYCLE_TIME: longest an idle background thread sleeps between two
  // agreement rounds, in milliseconds. Work wakes it at once, so this bounds
  // only how soon an idle rank notices another rank's shutdown or stall.
  double cycle_time_ms = 100.0;
  // HERD_CACHE_CAPACITY: names the response cache remembers; 0 turns it off.
  int64_t cache_capacity = 1024;
  // HERD_LOG_LEVEL.
  LogLevel log_level = LogLevel::kWarning;
  // HERD_RING_SEGMENT_BYTES: size of one ring segment; -1 (the variable's
  // "auto"): fitted to the process set's transport (src/transport_fit.h).
  int64_t ring_segment_bytes = -1;
  // HERD_SMALL_ALLREDUCE_BYTES: buffers up to this size use recursive
  // doubling instead of the ring under a fixed shm where shared memory does
  // not serve them, and try it first under auto; 0: the ring.
  // -1 (the variable's "auto"): collectives::small_allreduce_threshold(p).
  int64_t small_allreduce_bytes = -1;
  // HERD_EAGER_PIECE_BYTES: messages of up to two such pieces are cut into
  // pieces this long so that MPI sends them eagerly (mpi_transport.h); 0
  // never cuts; -1 (the variable's "auto"): from MPI's shared-memory eager
  // limit when the process set is on one machine (eager_limit.h), fitted to
  // the network when it spans hosts (src/transport_fit.h).
  int64_t eager_piece_bytes = -1;
  // HERD_SHM_ALLREDUCE_BYTES: CPU allreduces of at most this many bytes may
  // run through shared memory when the process set is on one machine
  // (collectives/shm/shm_allreduce.h); 0 never; -1 (the variable's "auto"):
  // any size.
  int64_t shm_allreduce_bytes = -1;
  // HERD_SHM_SINGLE_COPY: auto, on or off; see ShmSingleCopy.
  ShmSingleCopy shm_single_copy = ShmSingleCopy::kAuto;
  // HERD_ALLREDUCE_ALGORITHM.
  AllreduceAlgorithmSetting allreduce_algorithm = AllreduceAlgorithmSetting::kShm;
  // HERD_STALL_CHECK_TIME: seconds a tensor may wait for other ranks before
  // herd logs a warning naming it and the ranks it waits for; 0 disables.
  // Also how long a shared-memory allreduce waits for a rank before failing.
  double stall_check_seconds = 60.0;
  // HERD_STALL_SHUTDOWN_TIME: seconds a tensor may wait for ranks that have
  // not submitted it before every rank of the set fails what is pending,
  // naming per missing rank the names it lacks; 0 waits for ever.
  double stall_shutdown_seconds = 300.0;
  // HERD_COLLECTIVE_TIMEOUT: seconds a started collective (data or control
  // plane, MPI or shared memory) may make no progress before it fails,
  // naming the peer it waits for; 0 waits for ever.
  double collective_timeout_seconds = 120.0;
  // HERD_PROCESS_SETS: process sets made at init, e.g. "0,2;1,3" for the
  // sets {0,2} and {1,3}; they get ids 1, 2, ... in that order.
  std::vector<std::vector<int>> process_sets;
  // HERD_GPU_ALLREDUCE: NCCL or MPI, for every collective on GPU tensors.
  GpuAllreduce gpu_allreduce = GpuAllreduce::kNccl;
  // HERD_HIERARCHICAL_ALLREDUCE: CPU allreduces as a shared-memory allreduce
  // inside each host, an allreduce of each local rank's shard across hosts and
  // a shared-memory allgather (collectives/hierarchical_allreduce.h); GPU
  // allreduces (kOn only) as NCCL reduce-scatter inside a node, MPI ring
  // across nodes, NCCL allgather inside the node.
  HierarchicalAllreduce hierarchical_allreduce = HierarchicalAllreduce::kAuto;
  // HERD_HIERARCHICAL_ALLGATHER: CPU allgathers as a shared-memory allgather
  // inside each host, each local rank's slice across hosts and a shared-memory
  // allgather of the other hosts' slices (collectives/hierarchical_allgather.h).
  HierarchicalAllgather hierarchical_allgather = HierarchicalAllgather::kAuto;
  // HERD_NCCL_TIMEOUT: seconds a started GPU collective may take before herd
  // aborts the NCCL communicator and fails it; 0 waits for ever.
  double nccl_timeout_seconds = 600.0;
  // HERD_GPU_STAGING_BYTES: block size of the MPI path's pipeline through
  // pinned host memory (copy one block while the ring reduces another).
  int64_t gpu_staging_bytes = 4 * 1024 * 1024;
  // HERD_NUM_SERVERS (or DMLC_NUM_SERVER): the last this many ranks of the
  // job are parameter servers (include/herd/parameter_server.h).
  int64_t num_servers = 0;
  // HERD_KVSTORE_BIGARRAY_BOUND (or MXNET_KVSTORE_BIGARRAY_BOUND): dist_async
  // values of at least this many elements are split over every server.
  int64_t kvstore_bigarray_bound = 1000000;
  // HERD_ELASTIC_DIR: where herd.torch.elastic commits a job's state.
  std::string elastic_dir = "herd-elastic";
  // HERD_TIMELINE: the timeline file written from init on (docs/timeline.md),
  // "%r" standing for the rank; empty: none until herd::start_timeline.
  std::string timeline_path;
  // HERD_TIMELINE_MARK_CYCLES: the timeline marks each background-loop cycle.
  bool timeline_mark_cycles = false;
  // HERD_STATS: every rank prints its herd::stats() to stderr at shutdown.
  bool print_stats = false;
  // HERD_AUTOTUNE: rank 0 searches the fusion and chunk settings during the
  // first steps (src/autotune.h).
  bool autotune = false;
  // HERD_AUTOTUNE_LOG: the CSV of trials, "%r" standing for the rank; empty: none.
  std::string autotune_log;
  // HERD_AUTOTUNE_WARMUP_SAMPLES and HERD_AUTOTUNE_STEPS_PER_SAMPLE.
  int64_t autotune_warmup_samples = 3;
  int64_t autotune_steps_per_sample = 10;
};

// Returns the value of an environment variable, or nullptr when unset.
using EnvLookup = std::function<const char*(const char* variable)>;

// The process environment (std::getenv).
EnvLookup process_environment();

// What read_config has to tell besides errors, for herd::init to log once
// the rank and the log level are known.
struct ConfigNotes {
  // One sentence per HOROVOD_* variable set that herd cannot honour, naming
  // it, its value and why, e.g. "HOROVOD_CONTROLLER='gloo' is ignored:
  // herd's ranks coordinate over MPI only; it has no Gloo". Logged as warnings.
  std::vector<std::string> warnings;
  // One sentence per setting given by several of its variables with
  // different values, naming the one used, e.g. "HERD_FUSION_THRESHOLD:
  // herd uses HERD_FUSION_THRESHOLD='0' and ignores
  // HOROVOD_FUSION_THRESHOLD='1048576'". Logged at level info.
  std::vector<std::string> choices;
};

// Fills *config from `env`; unset variables keep their defaults. A setting
// has aliases: other frameworks' variables (DMLC_NUM_SERVER, Horovod's
// HOROVOD_FUSION_THRESHOLD, ...) read, in the units herd's variable uses,
// when its own variable is unset; the first alias set that gives a value
// wins (HOROVOD_STALL_CHECK_DISABLE=0 gives none). Every variable set is
// checked, the ones not used included. A malformed or out-of-range value
// fails with e.g.
// "HERD_FUSION_THRESHOLD='abc': expected a non-negative integer (bytes)" or
// "HOROVOD_FUSION_THRESHOLD='abc': expected a non-negative integer (bytes)".
// `notes`, when given, receives what herd::init logs (filled also when the
// read fails).
[[nodiscard]] Status read_config(const EnvLookup& env, Config* config,
                                 ConfigNotes* notes = nullptr);

struct SettingDoc {
  std::string variable;
  std::string default_value;
  std::string description;
  // herd::init fails unless every rank gives this setting the same value.
  bool compared_across_ranks = false;
};

// One entry per setting, in the order docs/configuration.md lists them.
std::vector<SettingDoc> setting_docs();

// A setting that herd::init compares across ranks, with its value in
// `config` as an integer (an enum's enumerator, a switch's 0 or 1).
struct AgreedSetting {
  const char* variable;
  int64_t value;
  // Any such integer of this setting as the variable spells it: "auto" for
  // the -1 that stands for auto, "NCCL" for an enumerator, digits otherwise.
  std::string (*text)(int64_t value);
};

// A variable of another framework that read_config takes for a setting.
struct AliasDoc {
  std::string variable;  // e.g. HOROVOD_CYCLE_TIME
  std::string setting;   // the HERD_* variable it stands for
};

// Every alias, in the order read_config prefers them for each setting.
std::vector<AliasDoc> alias_docs();

// The HOROVOD_* variables that draw a warning (ConfigNotes::warnings) for
// some or every value, in the order the warnings come.
std::vector<std::string> unhonoured_horovod_variables();

// The settings with compared_across_ranks, in the table's order.
std::vector<AgreedSetting> settings_that_must_agree(const Config& config);

// The names of the HERD_* variables set in the process environment.
std::vector<std::string> herd_variables_in_environment();

// One message per name in `names` that is neither a setting nor a HERD_*
// variable read by herd's scripts and herd-train, naming the known variable
// closest to it by edit distance, e.g. "HERD_FUSION_THRESOLD is not a herd
// setting and is ignored; did you mean HERD_FUSION_THRESHOLD?".
std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& names);

}  // namespace herd::detail
