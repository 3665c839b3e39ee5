// The table of HERD_* settings, kSettings: per setting its variable, default
// text, the sentence docs/configuration.md shows, the parser that stores it
// into Config and whether the ranks must agree on it. read_config,
// setting_docs and settings_that_must_agree all walk this one table, so a
// setting cannot be read without also being documented and, where it
// decides what the ranks exchange, compared across ranks.
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "src/config.h"
#include "src/config_table.h"

namespace herd::detail::config_table {
namespace {

constexpr int64_t kMaxCacheCapacity = int64_t{1} << 20;
constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// The parser of a size in bytes, 0 allowed, stored in config->*Field.
template <int64_t Config::*Field>
Status parse_non_negative_bytes(const char* variable, std::string_view text, Config* config) {
  auto value = parse_integer(text, 0, kMaxInt64);
  if (!value) return bad_value(variable, text, "a non-negative integer (bytes)");
  config->*Field = *value;
  return Status::ok();
}

// The parser of "auto" (stored as -1) or a size in bytes, 0 allowed, in
// config->*Field.
template <int64_t Config::*Field>
Status parse_auto_or_bytes(const char* variable, std::string_view text, Config* config) {
  if (text == "auto") {
    config->*Field = -1;
    return Status::ok();
  }
  auto value = parse_integer(text, 0, kMaxInt64);
  if (!value) return bad_value(variable, text, "auto or a non-negative integer (bytes)");
  config->*Field = *value;
  return Status::ok();
}

// The agreed value of an integer setting: the field itself.
template <int64_t Config::*Field>
int64_t field_value(const Config& config) {
  return config.*Field;
}

}  // namespace

// The one list of settings, in the order docs/configuration.md shows them.
// The last column says whether herd::init compares the setting across ranks:
// those that decide message layouts, fusion groups or the algorithm, which
// ranks that disagreed would hang on. HERD_PROCESS_SETS must agree too but
// is compared list by list when the sets are made; HERD_EAGER_PIECE_BYTES
// may differ because the ranks take the smallest value.
const std::array<Setting, 30> kSettings = {{
    {"HERD_FUSION_THRESHOLD", "4194304",
     "Most bytes packed into one fusion buffer; 0 turns fusion off, so every "
     "tensor is reduced on its own.",
     &parse_non_negative_bytes<&Config::fusion_threshold_bytes>,
     &field_value<&Config::fusion_threshold_bytes>},
    {"HERD_FUSION_MAX_TENSOR_BYTES", "262144",
     "A tensor larger than this many bytes is reduced on its own, straight "
     "from its input to its output, rather than copied into and out of a "
     "fusion buffer; 0 puts no limit on the tensors fused.",
     &parse_non_negative_bytes<&Config::fusion_max_tensor_bytes>,
     &field_value<&Config::fusion_max_tensor_bytes>},
    {"HERD_CYCLE_TIME", "100",
     "Longest an idle background thread sleeps between two agreement rounds, in "
     "milliseconds (a decimal such as 0.5 is allowed). A submitted tensor is taken "
     "up at once (by the thread waiting for it, or by the background thread, which "
     "an asynchronous submission wakes); this bounds how soon an idle rank sees "
     "another rank's shutdown.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_non_negative_decimal(text);
       if (!value) return bad_value(variable, text, "a non-negative number of milliseconds");
       config->cycle_time_ms = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_CACHE_CAPACITY", "1024",
     "Tensor names the response cache remembers, at most 1048576; 0 turns the "
     "cache off, so every tensor is negotiated through rank 0 every time.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 0, kMaxCacheCapacity);
       if (!value) {
         return bad_value(
             variable, text,
             fmt::format("a non-negative integer no larger than {} (names)", kMaxCacheCapacity));
       }
       config->cache_capacity = *value;
       return Status::ok();
     },
     &field_value<&Config::cache_capacity>},
    {"HERD_LOG_LEVEL", "warning",
     "Least severe message written to stderr: trace, debug, info, warning, "
     "error or off (any letter case).",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_log_level(text);
       if (!value) {
         return bad_value(variable, text, "one of trace, debug, info, warning, error, off");
       }
       config->log_level = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_RING_SEGMENT_BYTES", "auto",
     "Size of one segment of the ring algorithms (allreduce, allgather, "
     "reducescatter): each ring step sends a chunk in segments of at most this "
     "many bytes; auto: 1 MiB when the process set is on one machine, 4 MiB "
     "when it spans hosts.",
     [](const char* variable, std::string_view text, Config* config) {
       if (text == "auto") {
         config->ring_segment_bytes = -1;
         return Status::ok();
       }
       auto value = parse_integer(text, 1, kMaxInt64);
       if (!value) return bad_value(variable, text, "auto or a positive integer (bytes)");
       config->ring_segment_bytes = *value;
       return Status::ok();
     },
     &field_value<&Config::ring_segment_bytes>, &auto_or_decimal_text},
    {"HERD_SMALL_ALLREDUCE_BYTES", "auto",
     "Buffers of at most this many bytes use recursive doubling instead of the "
     "ring where HERD_ALLREDUCE_ALGORITHM=shm finds no shared memory for them, "
     "and try it first under auto; 0: the ring; auto: 64 KiB up to 8 ranks, "
     "growing with the number of ranks to 4 MiB from 513 on (docs/performance.md).",
     &parse_auto_or_bytes<&Config::small_allreduce_bytes>,
     &field_value<&Config::small_allreduce_bytes>, &auto_or_decimal_text},
    {"HERD_EAGER_PIECE_BYTES", "auto",
     "A message longer than this many bytes but at most twice as long is sent "
     "as two MPI messages (pieces) of at most this size, which MPI sends "
     "eagerly instead of through a rendezvous; 0 never cuts; auto: Open MPI's "
     "shared-memory eager limit (btl_vader_eager_limit) less 128 bytes when the "
     "process set is on one machine, else 0. Ranks use the smallest value among "
     "them.",
     &parse_auto_or_bytes<&Config::eager_piece_bytes>, kMayDiffer},
    {"HERD_SHM_ALLREDUCE_BYTES", "auto",
     "CPU allreduces of at most this many bytes may run through memory shared "
     "by the ranks instead of over MPI (a candidate of HERD_ALLREDUCE_ALGORITHM), "
     "when every rank of the process set is on one machine; 0 never; auto: any "
     "size.",
     &parse_auto_or_bytes<&Config::shm_allreduce_bytes>, &field_value<&Config::shm_allreduce_bytes>,
     &auto_or_decimal_text},
    {"HERD_SHM_SINGLE_COPY", "auto",
     "Whether the shared-memory allreduce copies each byte once between the "
     "ranks' own buffers (process_vm_readv) for large buffers instead of "
     "through the shared slots: auto where every rank can read every other "
     "rank's memory, on the same but herd::init fails where some rank cannot, "
     "off never (any letter case). Where it is used, allreduces whose buffers "
     "lie in a herd::SharedBuffer on every rank read straight from each "
     "other's memory. Every rank of a process set agrees.",
     [](const char* variable, std::string_view text, Config* config) {
       const std::string lower = lowercase(text);
       if (lower == "auto") {
         config->shm_single_copy = ShmSingleCopy::kAuto;
       } else if (lower == "on") {
         config->shm_single_copy = ShmSingleCopy::kOn;
       } else if (lower == "off") {
         config->shm_single_copy = ShmSingleCopy::kOff;
       } else {
         return bad_value(variable, text, "auto, on or off");
       }
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_ALLREDUCE_ALGORITHM", "shm",
     "The algorithm of CPU allreduces: auto measures the candidates (shared "
     "memory where it serves the size, the hierarchical allreduce where "
     "HERD_HIERARCHICAL_ALLREDUCE makes it one, the ring, recursive doubling) "
     "on the first calls of each size class, every rank then running the "
     "fastest and trying the others again now and then; shm, ring or "
     "recursive_doubling fixes it (shm takes the hierarchical allreduce from "
     "64 KiB up where the set has it, and falls back to the size threshold "
     "where neither serves the size). Any letter case.",
     [](const char* variable, std::string_view text, Config* config) {
       const std::string lower = lowercase(text);
       for (auto value :
            {AllreduceAlgorithmSetting::kAuto, AllreduceAlgorithmSetting::kShm,
             AllreduceAlgorithmSetting::kRing, AllreduceAlgorithmSetting::kRecursiveDoubling}) {
         if (lower == allreduce_algorithm_text(static_cast<int64_t>(value))) {
           config->allreduce_algorithm = value;
           return Status::ok();
         }
       }
       return bad_value(variable, text, "auto, shm, ring or recursive_doubling");
     },
     [](const Config& config) { return static_cast<int64_t>(config.allreduce_algorithm); },
     &allreduce_algorithm_text},
    {"HERD_STALL_CHECK_TIME", "60",
     "Seconds a tensor may wait for other ranks before herd logs a warning "
     "naming it and the ranks that have not submitted it; 0 turns the check off.",
     [](const char* variable, std::string_view text, Config* config) {
       // Same grammar as HERD_CYCLE_TIME: a non-negative finite decimal.
       auto value = parse_non_negative_decimal(text);
       if (!value) return bad_value(variable, text, "a non-negative number of seconds");
       config->stall_check_seconds = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_STALL_SHUTDOWN_TIME", "300",
     "Seconds a tensor may wait for ranks that have not submitted it before "
     "every rank of the process set fails what is pending, with one message "
     "naming, per missing rank, the tensors it has not submitted; 0 waits for ever.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_non_negative_decimal(text);
       if (!value) return bad_value(variable, text, "a non-negative number of seconds");
       config->stall_shutdown_seconds = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_COLLECTIVE_TIMEOUT", "120",
     "Seconds a started collective may make no progress (no byte moved, no peer "
     "arrived) before it fails on every rank that can still be reached, naming "
     "the peer it waits for and every rank it no longer hears from; 0 waits for "
     "ever.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_non_negative_decimal(text);
       if (!value) return bad_value(variable, text, "a non-negative number of seconds");
       config->collective_timeout_seconds = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_PROCESS_SETS", "",
     "Process sets made at init: rank lists separated by ';', ranks by ',' "
     "(\"0,2;1,3\" makes {0,2} as set 1 and {1,3} as set 2); empty makes none.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_rank_lists(text);
       if (!value) {
         return bad_value(variable, text,
                          "rank lists like 0,2;1,3 (non-negative integers, ',' within a set, ';' "
                          "between sets)");
       }
       config->process_sets = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_GPU_ALLREDUCE", "NCCL",
     "How collectives on GPU tensors run: NCCL on the device, or MPI through "
     "pinned host memory, copying one block while the ring reduces another "
     "(any letter case). A build without NCCL always uses MPI.",
     [](const char* variable, std::string_view text, Config* config) {
       const std::string lower = lowercase(text);
       if (lower == "nccl") {
         config->gpu_allreduce = GpuAllreduce::kNccl;
       } else if (lower == "mpi") {
         config->gpu_allreduce = GpuAllreduce::kMpi;
       } else {
         return bad_value(variable, text, "NCCL or MPI");
       }
       return Status::ok();
     },
     [](const Config& config) { return static_cast<int64_t>(config.gpu_allreduce); },
     &gpu_allreduce_text},
    {"HERD_HIERARCHICAL_ALLREDUCE", "auto",
     "CPU allreduces of a process set whose hosts each hold the same number "
     "(above 1) of its ranks, consecutive in the set: 1 runs every one "
     "hierarchically (a shared-memory reduce-scatter inside each host, each local "
     "rank's shard reduced across hosts, a shared-memory allgather), and a set "
     "laid out otherwise runs flat with one warning; auto makes it a candidate "
     "where it gives the flat algorithms' bits (a power of two ranks per host), "
     "taken from 64 KiB up by HERD_ALLREDUCE_ALGORITHM=shm and measured with the "
     "others by auto; 0 never. GPU allreduces: 1 runs them as an NCCL "
     "reduce-scatter among the ranks of each node, an MPI ring allreduce across "
     "nodes on each rank's part and an NCCL allgather inside the node (needs "
     "NCCL and the same number of ranks on every node); 0 and auto: one NCCL "
     "allreduce over all ranks.",
     [](const char* variable, std::string_view text, Config* config) {
       for (auto value : {HierarchicalAllreduce::kOff, HierarchicalAllreduce::kOn,
                          HierarchicalAllreduce::kAuto}) {
         if (text == hierarchical_allreduce_text(static_cast<int64_t>(value))) {
           config->hierarchical_allreduce = value;
           return Status::ok();
         }
       }
       return bad_value(variable, text, "auto, 0 or 1");
     },
     [](const Config& config) { return static_cast<int64_t>(config.hierarchical_allreduce); },
     &hierarchical_allreduce_text},
    {"HERD_HIERARCHICAL_ALLGATHER", "auto",
     "CPU allgathers of a process set whose hosts each hold the same number "
     "(above 1) of its ranks, consecutive in the set: 1 runs every one "
     "hierarchically (a shared-memory allgather inside each host, each local "
     "rank's slice of every host's rows across hosts, a shared-memory allgather "
     "of the other hosts' slices), and a set laid out otherwise runs flat with "
     "one warning; auto runs it from 8 MiB of output up; 0 never.",
     [](const char* variable, std::string_view text, Config* config) {
       for (auto value : {HierarchicalAllgather::kOff, HierarchicalAllgather::kOn,
                          HierarchicalAllgather::kAuto}) {
         if (text == hierarchical_allgather_text(static_cast<int64_t>(value))) {
           config->hierarchical_allgather = value;
           return Status::ok();
         }
       }
       return bad_value(variable, text, "auto, 0 or 1");
     },
     [](const Config& config) { return static_cast<int64_t>(config.hierarchical_allgather); },
     &hierarchical_allgather_text},
    {"HERD_NCCL_TIMEOUT", "600",
     "Seconds a started GPU collective may run before herd aborts its NCCL "
     "communicator (ncclCommAbort) and fails it and everything pending on that "
     "rank with an error naming the tensor; 0 waits for ever.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_non_negative_decimal(text);
       if (!value) return bad_value(variable, text, "a non-negative number of seconds");
       config->nccl_timeout_seconds = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_GPU_STAGING_BYTES", "4194304",
     "Block size of the MPI path for GPU tensors: blocks are copied to pinned "
     "host memory, reduced by the ring and copied back, the copies of one "
     "block overlapping the ring of another.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 1, kMaxInt64);
       if (!value) return bad_value(variable, text, "a positive integer (bytes)");
       config->gpu_staging_bytes = *value;
       return Status::ok();
     },
     &field_value<&Config::gpu_staging_bytes>},
    {"HERD_NUM_SERVERS", "0",
     "The last this many ranks of the job are parameter servers for dist_async "
     "KVStores, the others workers (herd::rank and herd::size count the workers "
     "only); herd::init on a server serves until every worker has shut herd "
     "down, then ends the process. DMLC_NUM_SERVER is read when this is unset.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 0, std::numeric_limits<int>::max());
       if (!value) return bad_value(variable, text, "a non-negative integer (ranks)");
       config->num_servers = *value;
       return Status::ok();
     },
     &field_value<&Config::num_servers>, &decimal_text, "DMLC_NUM_SERVER"},
    {"HERD_KVSTORE_BIGARRAY_BOUND", "1000000",
     "A dist_async KVStore value of at least this many elements is split over "
     "every server, a smaller one kept whole on one server. "
     "MXNET_KVSTORE_BIGARRAY_BOUND is read when this is unset.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 1, kMaxInt64);
       if (!value) return bad_value(variable, text, "a positive integer (elements)");
       config->kvstore_bigarray_bound = *value;
       return Status::ok();
     },
     &field_value<&Config::kvstore_bigarray_bound>, &decimal_text, "MXNET_KVSTORE_BIGARRAY_BOUND"},
    {"HERD_ELASTIC_DIR", "herd-elastic",
     "Directory where herd.torch.elastic's state.commit() writes the job's state "
     "(state.pt, rank 0) and where a relaunched job reads it; relative to the "
     "working directory.",
     [](const char* variable, std::string_view text, Config* config) {
       if (text.empty()) return bad_value(variable, text, "a directory path");
       config->elastic_dir = std::string(text);
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_TIMELINE", "",
     "File each rank's timeline is written to from herd::init on (Chrome trace "
     "JSON, docs/timeline.md); %r in it stands for the rank, and without %r "
     "rank 0 alone writes. Empty, or DYNAMIC, writes none until "
     "herd::start_timeline.",
     [](const char*, std::string_view text, Config* config) {
       // DYNAMIC is upstream's "no file yet, started later by the API", which
       // herd's API always allows.
       config->timeline_path = text == "DYNAMIC" ? std::string() : std::string(text);
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_TIMELINE_MARK_CYCLES", "0",
     "1: the timeline marks the start of every background-loop cycle "
     "(CYCLE_START); 0: it does not.",
     [](const char* variable, std::string_view text, Config* config) {
       if (text != "0" && text != "1") return bad_value(variable, text, "0 or 1");
       config->timeline_mark_cycles = text == "1";
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_STATS", "0",
     "1: every rank prints its counters (herd::stats(): operations, bytes and "
     "times per collective and process set) to stderr at shutdown; 0: none.",
     [](const char* variable, std::string_view text, Config* config) {
       if (text != "0" && text != "1") return bad_value(variable, text, "0 or 1");
       config->print_stats = text == "1";
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_AUTOTUNE", "0",
     "1: during the first steps of the job rank 0 searches the fusion threshold, "
     "the largest fused tensor, the shared-memory chunk and the ring segment for "
     "the most bytes per second of whole steps, every rank applying each trial in "
     "the same cycle, and then fixes the best (docs/operations.md, Autotuning); "
     "0: the settings stay as given. Rank 0's value decides.",
     [](const char* variable, std::string_view text, Config* config) {
       if (text != "0" && text != "1") return bad_value(variable, text, "0 or 1");
       config->autotune = text == "1";
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_AUTOTUNE_LOG", "",
     "CSV file of the autotuning trials: per trial the cycle it started, its "
     "settings and its score in bytes/s, and a last row 'best'. %r in it stands "
     "for the rank, and without %r rank 0 alone writes. Empty: no log.",
     [](const char*, std::string_view text, Config* config) {
       config->autotune_log = std::string(text);
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_AUTOTUNE_WARMUP_SAMPLES", "3",
     "Samples autotuning measures and drops at the start of the job, before its "
     "first trial is scored.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 0, std::numeric_limits<int>::max());
       if (!value) return bad_value(variable, text, "a non-negative integer (samples)");
       config->autotune_warmup_samples = *value;
       return Status::ok();
     },
     kMayDiffer},
    {"HERD_AUTOTUNE_STEPS_PER_SAMPLE", "10",
     "Steps one autotuning sample spans: a sample ends once some tensor has been "
     "reduced this many times in it. A trial's score is the median of 3 samples.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 1, std::numeric_limits<int>::max());
       if (!value) return bad_value(variable, text, "a positive integer (steps)");
       config->autotune_steps_per_sample = *value;
       return Status::ok();
     },
     kMayDiffer},
}};

}  // namespace herd::detail::config_table

namespace herd::detail {

std::vector<SettingDoc> setting_docs() {
  std::vector<SettingDoc> docs;
  docs.reserve(config_table::kSettings.size());
  for (const config_table::Setting& setting : config_table::kSettings) {
    docs.push_back({setting.variable, setting.default_text, setting.description,
                    setting.agreed != config_table::kMayDiffer});
  }
  return docs;
}

std::vector<AgreedSetting> settings_that_must_agree(const Config& config) {
  std::vector<AgreedSetting> agreed;
  for (const config_table::Setting& setting : config_table::kSettings) {
    if (setting.agreed != config_table::kMayDiffer) {
      agreed.push_back({setting.variable, setting.agreed(config), setting.text});
    }
  }
  return agreed;
}

}  // namespace herd::detail
