// The table of HERD_* settings and the strict parsers behind it.
//
// Each setting is one row of kSettings: its variable, default text, the
// sentence docs/configuration.md shows, and the parser that stores it into
// Config. read_config and setting_docs both walk that one table, so a setting
// cannot be read without also being documented. Called from herd::init on the
// application thread, once, before MPI starts.
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
const std::array<Setting, 21> kSettings = {{
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
    {"HERD_RING_SEGMENT_BYTES", "1048576",
     "Size of one segment of the ring algorithms (allreduce, allgather, "
     "reducescatter): each ring step sends a chunk in segments of at most this "
     "many bytes.",
     [](const char* variable, std::string_view text, Config* config) {
       auto value = parse_integer(text, 1, kMaxInt64);
       if (!value) return bad_value(variable, text, "a positive integer (bytes)");
       config->ring_segment_bytes = *value;
       return Status::ok();
     },
     &field_value<&Config::ring_segment_bytes>},
    {"HERD_SMALL_ALLREDUCE_BYTES", "auto",
     "Buffers of at most this many bytes use recursive doubling instead of the "
     "ring; 0 always uses the ring; auto: 64 KiB up to 8 ranks, growing with "
     "the number of ranks to 4 MiB from 513 on (docs/performance.md).",
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
     "CPU allreduces of at most this many bytes run through memory shared by "
     "the ranks instead of over MPI, when every rank of the process set is on "
     "one machine; 0 never; auto: any size.",
     &parse_auto_or_bytes<&Config::shm_allreduce_bytes>, &field_value<&Config::shm_allreduce_bytes>,
     &auto_or_decimal_text},
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
     "the peer it waits for; 0 waits for ever.",
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
    {"HERD_HIERARCHICAL_ALLREDUCE", "0",
     "1: GPU allreduces run as an NCCL reduce-scatter among the ranks of each "
     "node, an MPI ring allreduce across nodes on each rank's part, and an NCCL "
     "allgather inside the node (needs NCCL and the same number of ranks on "
     "every node); 0: one NCCL allreduce over all ranks.",
     [](const char* variable, std::string_view text, Config* config) {
       if (text != "0" && text != "1") return bad_value(variable, text, "0 or 1");
       config->hierarchical_allreduce = text == "1";
       return Status::ok();
     },
     [](const Config& config) -> int64_t { return config.hierarchical_allreduce ? 1 : 0; }},
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
}};

// HERD_* variables that are not settings: herd's scripts (scripts/,
// benchmarks/gpu/device_check.sh, setup.py) and herd-train (one per option,
// examples/herd_train/train_options.h) read them, and they reach herd::init
// through the environment of the processes those start. Known, so that they
// draw no warning; candidates for "did you mean" like the settings.
constexpr std::array<const char*, 45> kToolVariables = {{
    // scripts/ and setup.py
    "HERD_BUILD_DIR",
    "HERD_CMAKE_ARGS",
    "HERD_DEMO_RANKS",
    "HERD_ROOT",
    "HERD_SCRIPT",
    "HERD_TRAIN_RANKS",
    "HERD_VENV",
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
    // herd-train's options
    "HERD_BATCH_SIZE",
    "HERD_CHECKPOINT",
    "HERD_COMMUNICATION",
    "HERD_COMPRESSION_THRESHOLD",
    "HERD_DATA_DIR",
    "HERD_DATA_THREADS",
    "HERD_DEVICE_MS",
    "HERD_EPOCHS",
    "HERD_GRADIENT_ACCUMULATION",
    "HERD_GRADIENT_COMPRESSION",
    "HERD_HIDDEN",
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
    "HERD_QUIET",
    "HERD_RESUME",
    "HERD_SCALE_LR",
    "HERD_SEED",
    "HERD_SLOW_FACTOR",
    "HERD_SLOW_RANK",
    "HERD_WARMUP_EPOCHS",
    "HERD_WEIGHT_DECAY",
}};

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

Status read_config(const EnvLookup& env, Config* config) {
  // Every bad variable is reported at once, so a job launched with several
  // typos fails once instead of once per typo; *config changes only when all
  // settings are good.
  Config result = *config;
  std::string errors;
  for (const Setting& setting : kSettings) {
    const char* variable = setting.variable;
    const char* text = env(variable);
    if (text == nullptr && setting.alias != nullptr) {
      variable = setting.alias;
      text = env(variable);
    }
    if (text == nullptr) continue;
    Status status = setting.parse(variable, text, &result);
    if (!status.is_ok()) {
      if (!errors.empty()) errors += "; ";
      errors += status.message();
    }
  }
  if (!errors.empty()) return Status::error(errors);
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
