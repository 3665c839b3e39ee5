// The table of HERD_* settings and the strict parsers behind it.
//
// Each setting is one row of kSettings: its variable, default text, the
// sentence docs/configuration.md shows, and the parser that stores it into
// Config. read_config and setting_docs both walk that one table, so a setting
// cannot be read without also being documented. Other frameworks' names for
// a setting (Horovod's HOROVOD_* among them) are the table kAliases, the
// HOROVOD_* variables herd cannot honour the table kUnhonoured. Called from
// herd::init on the application thread, once, before MPI starts.
#include "src/config.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>

namespace herd::detail {
namespace {

// Parsing is strict on purpose: a typo such as "64M" or "1,000" must fail
// init rather than silently fall back to a default the user did not choose.
// std::from_chars takes no sign for unsigned types, no leading whitespace and
// no locale, and reports overflow, which is exactly the strictness wanted.
std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  if (value > static_cast<uint64_t>(max)) return std::nullopt;
  const auto signed_value = static_cast<int64_t>(value);
  if (signed_value < min) return std::nullopt;
  return signed_value;
}

std::optional<double> parse_non_negative_decimal(std::string_view text) {
  double value = 0.0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
  // "-0" parses as -0.0, which compares equal to 0 and is harmless.
  if (!std::isfinite(value) || value < 0.0) return std::nullopt;
  return value;
}

std::string lowercase(std::string_view text) {
  std::string lower(text);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower;
}

std::optional<LogLevel> parse_log_level(std::string_view text) {
  const std::string lower = lowercase(text);
  for (LogLevel level : {LogLevel::kTrace, LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarning,
                         LogLevel::kError, LogLevel::kOff}) {
    if (lower == to_string(level)) return level;
  }
  return std::nullopt;
}

// "0,2;1,3" -> {{0,2},{1,3}}; "" -> {}. Ranges are checked at init, when
// the job's size is known.
std::optional<std::vector<std::vector<int>>> parse_rank_lists(std::string_view text) {
  std::vector<std::vector<int>> lists;
  if (text.empty()) return lists;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(';', start), text.size());
    std::string_view list = text.substr(start, end - start);
    std::vector<int> ranks;
    std::size_t at = 0;
    while (at <= list.size()) {
      const std::size_t comma = std::min(list.find(',', at), list.size());
      auto rank = parse_integer(list.substr(at, comma - at), 0, std::numeric_limits<int>::max());
      if (!rank) return std::nullopt;
      ranks.push_back(static_cast<int>(*rank));
      at = comma + 1;
    }
    lists.push_back(std::move(ranks));
    start = end + 1;
  }
  return lists;
}

Status bad_value(const char* variable, std::string_view text, std::string_view expected) {
  return Status::error(fmt::format("{}='{}': expected {}", variable, text, expected));
}

using Parser = Status (*)(const char* variable, std::string_view text, Config* config);
// The setting's value as an integer, for settings every rank must give the
// same value (AgreedSetting in config.h).
using AgreedValue = int64_t (*)(const Config& config);
// The column's value for settings the ranks may give different values.
constexpr AgreedValue kMayDiffer = nullptr;
// An agreed integer as the variable spells it (AgreedSetting::text).
using ValueText = std::string (*)(int64_t value);

std::string decimal_text(int64_t value) { return std::to_string(value); }

// The settings whose "auto" is stored as -1 (parse_auto_or_bytes).
std::string auto_or_decimal_text(int64_t value) {
  return value == -1 ? std::string("auto") : std::to_string(value);
}

std::string gpu_allreduce_text(int64_t value) {
  switch (static_cast<GpuAllreduce>(value)) {
    case GpuAllreduce::kNccl: return "NCCL";
    case GpuAllreduce::kMpi: return "MPI";
  }
  return fmt::format("GpuAllreduce({})", value);
}

std::string allreduce_algorithm_text(int64_t value) {
  switch (static_cast<AllreduceAlgorithmSetting>(value)) {
    case AllreduceAlgorithmSetting::kAuto: return "auto";
    case AllreduceAlgorithmSetting::kShm: return "shm";
    case AllreduceAlgorithmSetting::kRing: return "ring";
    case AllreduceAlgorithmSetting::kRecursiveDoubling: return "recursive_doubling";
  }
  return fmt::format("AllreduceAlgorithmSetting({})", value);
}

std::string hierarchical_allreduce_text(int64_t value) {
  switch (static_cast<HierarchicalAllreduce>(value)) {
    case HierarchicalAllreduce::kOff: return "0";
    case HierarchicalAllreduce::kOn: return "1";
    case HierarchicalAllreduce::kAuto: return "auto";
  }
  return fmt::format("HierarchicalAllreduce({})", value);
}

std::string hierarchical_allgather_text(int64_t value) {
  switch (static_cast<HierarchicalAllgather>(value)) {
    case HierarchicalAllgather::kOff: return "0";
    case HierarchicalAllgather::kOn: return "1";
    case HierarchicalAllgather::kAuto: return "auto";
  }
  return fmt::format("HierarchicalAllgather({})", value);
}

struct Setting {
  const char* variable;
  const char* default_text;  // must parse to the Config member's initializer
  const char* description;
  Parser parse;
  AgreedValue agreed;
  ValueText text = &decimal_text;  // of agreed settings
  // Another variable read when `variable` is unset (the name upstream's
  // recipes use), or null.
  const char* alias = nullptr;
};

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

// HERD_* variables that are not settings: herdrun, herd's scripts (scripts/,
// benchmarks/, setup.py) and herd-train (one per option,
// examples/herd_train/train_options.h) read them, and they reach herd::init
// through the environment of the processes those start. Known, so that they
// draw no warning; candidates for "did you mean" like the settings.
constexpr std::array<const char*, 56> kToolVariables = {{
    // scripts/ and setup.py
    "HERD_BUILD_DIR",
    "HERD_CMAKE_ARGS",
    "HERD_DEMO_RANKS",
    "HERD_ROOT",
    "HERD_SCRIPT",
    "HERD_TRAIN_RANKS",
    "HERD_VENV",
    // scripts/emulated_hosts.py's launch agent, and benchmarks/multihost_report.sh
    "HERD_AGENT_PREFIX",
    "HERD_REPORT_MAX_BYTES",
    // benchmarks/gpu/device_check.sh
    "HERD_CHECK_BUDGET_S",
    "HERD_CHECK_BUILD_DIR",
    "HERD_CHECK_BUILD_LIMIT_S",
    "HERD_CHECK_FORCE_DEBS",
    "HERD_CHECK_JOBS",
    "HERD_CHECK_KEEP_BUILD",
    "HERD_CHECK_PREFIX",
    "HERD_CHECK_TARGETS",
    // tests/scripts/test_script_help.py
    "HERD_TEST_CALLS",
    // herdrun (launcher/): which launch of the job this is, 0 for the first
    "HERD_RESTART_COUNT",
    // herd-train's options
    "HERD_BATCH_SIZE",
    "HERD_CHECKPOINT",
    "HERD_COMMIT_EVERY",
    "HERD_COMMUNICATION",
    "HERD_COMPRESSION_THRESHOLD",
    "HERD_DATA",
    "HERD_DATA_DIR",
    "HERD_DATA_SHARDING",
    "HERD_DATA_THREADS",
    "HERD_DEVICE_MS",
    "HERD_EPOCHS",
    "HERD_GRADIENT_ACCUMULATION",
    "HERD_GRADIENT_COMPRESSION",
    "HERD_HIDDEN",
    "HERD_KILL_AT_STEP",
    "HERD_KILL_RANK",
    "HERD_KVSTORE",
    "HERD_LEARNING_RATE",
    "HERD_LR_SCHEDULE",
    "HERD_LR_STEP_EPOCHS",
    "HERD_LR_STEP_GAMMA",
    "HERD_MAX_STEPS_PER_EPOCH",
    "HERD_MOMENTUM",
    "HERD_OPTIMIZER",
    "HERD_PRINT_CHECKSUM",
    "HERD_PRINT_STEP_RATES",
    "HERD_PROGRESS",
    "HERD_PROGRESS_INTERVAL",
    "HERD_QUIET",
    "HERD_RESUME",
    "HERD_SCALE_LR",
    "HERD_SEED",
    "HERD_SLOW_FACTOR",
    "HERD_SLOW_RANK",
    "HERD_VAL_DATA",
    "HERD_WARMUP_EPOCHS",
    "HERD_WEIGHT_DECAY",
}};

// Aliases: variables of other frameworks that stand for a setting, so that
// their jobs run unchanged. An alias's value is turned into the setting's
// spelling and checked by the setting's parser under the alias's name. The
// units are herd's already: Horovod's fusion threshold is in bytes, its
// cycle time in milliseconds and its stall times in seconds.

// Sets *setting_text to the setting's spelling of an alias's `text`, or to
// nullopt when the value asks for nothing (the setting keeps its value).
using Conversion = Status (*)(const char* variable, std::string_view text,
                              std::optional<std::string>* setting_text);

Status same_spelling(const char* /*variable*/, std::string_view text,
                     std::optional<std::string>* setting_text) {
  *setting_text = std::string(text);
  return Status::ok();
}

// Horovod's levels, in any letter case. FATAL, which Horovod logs only as it
// aborts, is herd's error, the most severe level that still shows failures.
Status horovod_log_level(const char* variable, std::string_view text,
                         std::optional<std::string>* setting_text) {
  const std::string lower = lowercase(text);
  if (lower == "fatal") {
    *setting_text = "error";
    return Status::ok();
  }
  for (const char* level : {"trace", "debug", "info", "warning", "error"}) {
    if (lower == level) {
      *setting_text = lower;
      return Status::ok();
    }
  }
  return bad_value(variable, text, "one of trace, debug, info, warning, error, fatal");
}

// HOROVOD_STALL_CHECK_DISABLE=1 turns Horovod's stall inspector off, which
// both warns and shuts a stalled job down; 0 leaves both as they are.
Status stall_check_disable(const char* variable, std::string_view text,
                           std::optional<std::string>* setting_text) {
  if (text == "1") {
    *setting_text = "0";
  } else if (text == "0") {
    setting_text->reset();
  } else {
    return bad_value(variable, text, "0 or 1");
  }
  return Status::ok();
}

// Horovod's on/off switches that herd's setting extends with "auto": the
// alias takes only the switch's 0 and 1.
Status horovod_switch(const char* variable, std::string_view text,
                      std::optional<std::string>* setting_text) {
  if (text != "0" && text != "1") return bad_value(variable, text, "0 or 1");
  return same_spelling(variable, text, setting_text);
}

// HOROVOD_TIMELINE=DYNAMIC opens no file at init (the program starts the
// timeline later through the API); any other value names the file.
Status horovod_timeline(const char* variable, std::string_view text,
                        std::optional<std::string>* setting_text) {
  if (text == "DYNAMIC") {
    setting_text->reset();
    return Status::ok();
  }
  return same_spelling(variable, text, setting_text);
}

struct Alias {
  const char* setting;   // the HERD_* variable it stands for
  const char* variable;  // the alias
  Conversion convert;
};

// Read only while the setting's own variable is unset; of a setting's
// aliases the first one set that gives a value wins (HOROVOD_GPU_ALLREDUCE
// before HOROVOD_GPU_OPERATIONS, as Horovod's build lets the collective's
// own variable override the one for all; HOROVOD_STALL_CHECK_DISABLE=1 before
// the times, as Horovod then checks nothing). An alias of a setting this
// build lacks is not read. The Setting::alias column comes before these.
const std::array<Alias, 18> kAliases = {{
    {"HERD_FUSION_THRESHOLD", "HOROVOD_FUSION_THRESHOLD", &same_spelling},
    {"HERD_CYCLE_TIME", "HOROVOD_CYCLE_TIME", &same_spelling},
    {"HERD_CACHE_CAPACITY", "HOROVOD_CACHE_CAPACITY", &same_spelling},
    {"HERD_LOG_LEVEL", "HOROVOD_LOG_LEVEL", &horovod_log_level},
    {"HERD_STALL_CHECK_TIME", "HOROVOD_STALL_CHECK_DISABLE", &stall_check_disable},
    {"HERD_STALL_CHECK_TIME", "HOROVOD_STALL_CHECK_TIME_SECONDS", &same_spelling},
    {"HERD_STALL_SHUTDOWN_TIME", "HOROVOD_STALL_CHECK_DISABLE", &stall_check_disable},
    {"HERD_STALL_SHUTDOWN_TIME", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", &same_spelling},
    {"HERD_GPU_ALLREDUCE", "HOROVOD_GPU_ALLREDUCE", &same_spelling},
    {"HERD_GPU_ALLREDUCE", "HOROVOD_GPU_OPERATIONS", &same_spelling},
    {"HERD_HIERARCHICAL_ALLREDUCE", "HOROVOD_HIERARCHICAL_ALLREDUCE", &horovod_switch},
    {"HERD_HIERARCHICAL_ALLGATHER", "HOROVOD_HIERARCHICAL_ALLGATHER", &horovod_switch},
    {"HERD_TIMELINE", "HOROVOD_TIMELINE", &horovod_timeline},
    {"HERD_TIMELINE_MARK_CYCLES", "HOROVOD_TIMELINE_MARK_CYCLES", &same_spelling},
    {"HERD_AUTOTUNE", "HOROVOD_AUTOTUNE", &same_spelling},
    {"HERD_AUTOTUNE_LOG", "HOROVOD_AUTOTUNE_LOG", &same_spelling},
    {"HERD_AUTOTUNE_WARMUP_SAMPLES", "HOROVOD_AUTOTUNE_WARMUP_SAMPLES", &same_spelling},
    {"HERD_AUTOTUNE_STEPS_PER_SAMPLE", "HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", &same_spelling},
}};

// HOROVOD_* variables that ask for something herd does not do. A value in
// `herd_does_anyway` ('|' between values, any letter case) asks for what
// herd does regardless and draws no warning; any other value draws
// "<variable>='<value>' is ignored: <why>". The other HOROVOD_* names are
// ignored without a word: Horovod's build and launcher settings, the
// launcher's plumbing, and names programs use for their own ends (Horovod's
// tests set HOROVOD_TEST_GPU); docs/configuration.md lists them all.
struct UnhonouredVariable {
  const char* variable;
  const char* herd_does_anyway;
  const char* why;
};

constexpr char kNoBayesianOptimisation[] =
    "herd's autotuning searches by coordinate descent, not Bayesian optimisation; "
    "HERD_AUTOTUNE_STEPS_PER_SAMPLE sets how long each sample is";

const std::array<UnhonouredVariable, 20> kUnhonoured = {{
    {"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "", kNoBayesianOptimisation},
    {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "", kNoBayesianOptimisation},
    {"HOROVOD_CONTROLLER", "mpi", "herd's ranks coordinate over MPI only; it has no Gloo"},
    {"HOROVOD_CPU_OPERATIONS", "mpi",
     "herd runs CPU collectives over MPI and shared memory only; it has neither Gloo nor oneCCL"},
    {"HOROVOD_CCL_CACHE", "", "herd has no oneCCL"},
    {"HOROVOD_GLOO_IFACE", "",
     "herd has no Gloo; MPI picks the network (Open MPI: --mca btl_tcp_if_include)"},
    {"HOROVOD_GLOO_TIMEOUT_SECONDS", "",
     "herd has no Gloo; HERD_COLLECTIVE_TIMEOUT bounds a collective that makes no progress"},
    {"HOROVOD_RANK", "",
     "herd takes the ranks from MPI; processes started without MPI (horovodrun --gloo, Ray, "
     "Spark) are jobs of one rank each: start the job with mpirun"},
    {"HOROVOD_SIZE", "",
     "herd takes the ranks from MPI; processes started without MPI (horovodrun --gloo, Ray, "
     "Spark) are jobs of one rank each: start the job with mpirun"},
    {"HOROVOD_MPI_THREADS_DISABLE", "0", "herd's background thread needs MPI_THREAD_MULTIPLE"},
    {"HOROVOD_TORUS_ALLREDUCE", "0",
     "herd has no torus allreduce; HERD_HIERARCHICAL_ALLREDUCE is the nearest"},
    {"HOROVOD_BATCH_D2D_MEMCOPIES", "1",
     "herd always packs a GPU fusion buffer with one batched copy kernel"},
    {"HOROVOD_NUM_NCCL_STREAMS", "1", "herd runs a process set's GPU collectives on one stream"},
    {"HOROVOD_THREAD_AFFINITY", "", "herd does not pin its threads to cores"},
    {"HOROVOD_DISABLE_GROUP_FUSION", "0",
     "herd fuses the tensors of a group with other tensors like any others"},
    {"HOROVOD_DISABLE_NVTX_RANGES", "1", "herd emits no NVTX ranges"},
    {"HOROVOD_ENABLE_XLA_OPS", "0", "herd has no TensorFlow XLA operations"},
    {"HOROVOD_ADASUM_MPI_CHUNK_SIZE", "", "herd's Adasum has no chunk size to set"},
    {"HOROVOD_ELASTIC", "0",
     "herd's elastic training restarts the whole job (herdrun --max-restarts) instead of "
     "changing its hosts while it runs"},
    {"HOROVOD_LOG_HIDE_TIME", "1", "herd's log lines carry no time"},
}};

// Horovod's build picks NCCL or MPI for each GPU collective; herd picks one
// way for all of them (HERD_GPU_ALLREDUCE), so these warn only when they ask
// for the other way.
constexpr std::array<const char*, 4> kPerCollectiveGpuVariables = {{
    "HOROVOD_GPU_ALLGATHER",
    "HOROVOD_GPU_BROADCAST",
    "HOROVOD_GPU_ALLTOALL",
    "HOROVOD_GPU_REDUCESCATTER",
}};

// Whether `text` is one of the '|'-separated `values`, in any letter case.
bool is_one_of(std::string_view text, std::string_view values) {
  const std::string lower = lowercase(text);
  std::size_t start = 0;
  while (start < values.size()) {
    const std::size_t end = std::min(values.find('|', start), values.size());
    if (lower == values.substr(start, end - start)) return true;
    start = end + 1;
  }
  return false;
}

// ConfigNotes::warnings for the environment and the settings read from it.
std::vector<std::string> unhonoured_warnings(const EnvLookup& env, const Config& config) {
  std::vector<std::string> warnings;
  for (const UnhonouredVariable& unhonoured : kUnhonoured) {
    const char* text = env(unhonoured.variable);
    if (text == nullptr || is_one_of(text, unhonoured.herd_does_anyway)) continue;
    warnings.push_back(
        fmt::format("{}='{}' is ignored: {}", unhonoured.variable, text, unhonoured.why));
  }
  const std::string chosen = gpu_allreduce_text(static_cast<int64_t>(config.gpu_allreduce));
  for (const char* variable : kPerCollectiveGpuVariables) {
    const char* text = env(variable);
    if (text == nullptr || lowercase(text) == lowercase(chosen)) continue;
    warnings.push_back(fmt::format(
        "{}='{}' is ignored: herd runs every GPU collective the one way HERD_GPU_ALLREDUCE "
        "picks, here {}",
        variable, text, chosen));
  }
  return warnings;
}

// Levenshtein distance: single-character insertions, deletions and
// substitutions that turn `a` into `b`.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> previous(b.size() + 1);
  std::vector<std::size_t> current(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitution});
    }
    std::swap(previous, current);
  }
  return previous[b.size()];
}

}  // namespace

EnvLookup process_environment() {
  // The only getenv in herd. Called before the background thread exists, so
  // nothing races a setenv.
  return [](const char* variable) -> const char* { return std::getenv(variable); };
}

Status read_config(const EnvLookup& env, Config* config, ConfigNotes* notes) {
  // Every bad variable is reported at once, so a job launched with several
  // typos fails once instead of once per typo; *config changes only when all
  // settings are good.
  Config result = *config;
  std::vector<std::string> errors;
  std::vector<std::string> choices;
  for (const Setting& setting : kSettings) {
    // The variables that can give this setting, in the order they win.
    std::vector<std::pair<const char*, Conversion>> sources = {{setting.variable, &same_spelling}};
    if (setting.alias != nullptr) sources.emplace_back(setting.alias, &same_spelling);
    for (const Alias& alias : kAliases) {
      if (std::string_view(alias.setting) == setting.variable) {
        sources.emplace_back(alias.variable, alias.convert);
      }
    }
    // The variable used and its value as set; the others set are parsed
    // into a scratch copy, so that a bad value fails whether used or not.
    const char* used = nullptr;
    std::string used_text;
    std::string used_setting_text;
    for (const auto& [variable, convert] : sources) {
      const char* text = env(variable);
      if (text == nullptr) continue;
      std::optional<std::string> setting_text;
      Status status = convert(variable, text, &setting_text);
      if (status.is_ok() && setting_text) {
        Config scratch;
        status = setting.parse(variable, *setting_text, used == nullptr ? &result : &scratch);
      }
      if (!status.is_ok()) {
        // HOROVOD_STALL_CHECK_DISABLE stands for two settings: one message.
        if (std::find(errors.begin(), errors.end(), status.message()) == errors.end()) {
          errors.push_back(status.message());
        }
        continue;
      }
      if (!setting_text) continue;
      if (used == nullptr) {
        used = variable;
        used_text = text;
        used_setting_text = *setting_text;
      } else if (*setting_text != used_setting_text) {
        choices.push_back(fmt::format("{}: herd uses {}='{}' and ignores {}='{}'", setting.variable,
                                      used, used_text, variable, text));
      }
    }
  }
  if (notes != nullptr) {
    notes->warnings = unhonoured_warnings(env, result);
    notes->choices = std::move(choices);
  }
  if (!errors.empty()) return Status::error(fmt::format("{}", fmt::join(errors, "; ")));
  *config = result;
  return Status::ok();
}

std::vector<SettingDoc> setting_docs() {
  std::vector<SettingDoc> docs;
  docs.reserve(kSettings.size());
  for (const Setting& setting : kSettings) {
    docs.push_back({setting.variable, setting.default_text, setting.description,
                    setting.agreed != kMayDiffer});
  }
  return docs;
}

std::vector<AliasDoc> alias_docs() {
  std::vector<AliasDoc> docs;
  for (const Setting& setting : kSettings) {
    if (setting.alias != nullptr) docs.push_back({setting.alias, setting.variable});
  }
  for (const Alias& alias : kAliases) docs.push_back({alias.variable, alias.setting});
  return docs;
}

std::vector<std::string> unhonoured_horovod_variables() {
  std::vector<std::string> names;
  for (const UnhonouredVariable& unhonoured : kUnhonoured) names.emplace_back(unhonoured.variable);
  names.insert(names.end(), kPerCollectiveGpuVariables.begin(), kPerCollectiveGpuVariables.end());
  return names;
}

std::vector<std::string> herd_variables_in_environment() {
  // Like process_environment, read on the thread calling herd::init before
  // any thread of herd's exists.
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view assignment(*entry);
    if (assignment.rfind("HERD_", 0) != 0) continue;
    names.emplace_back(assignment.substr(0, assignment.find('=')));
  }
  return names;
}

std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& names) {
  std::vector<std::string_view> known;
  for (const Setting& setting : kSettings) known.emplace_back(setting.variable);
  known.insert(known.end(), kToolVariables.begin(), kToolVariables.end());
  std::vector<std::string> warnings;
  for (const std::string& name : names) {
    if (std::find(known.begin(), known.end(), name) != known.end()) continue;
    // Ties go to the earlier name: the settings, in the table's order, first.
    std::string_view closest = known.front();
    std::size_t closest_distance = edit_distance(name, closest);
    for (std::string_view candidate : known) {
      const std::size_t distance = edit_distance(name, candidate);
      if (distance < closest_distance) {
        closest = candidate;
        closest_distance = distance;
      }
    }
    warnings.push_back(
        fmt::format("{} is not a herd setting and is ignored; did you mean {}?", name, closest));
  }
  return warnings;
}

std::vector<AgreedSetting> settings_that_must_agree(const Config& config) {
  std::vector<AgreedSetting> agreed;
  for (const Setting& setting : kSettings) {
    if (setting.agreed != kMayDiffer) {
      agreed.push_back({setting.variable, setting.agreed(config), setting.text});
    }
  }
  return agreed;
}

}  // namespace herd::detail
