// Other frameworks' variables: the aliases that stand for a setting
// (kAliases, Horovod's HOROVOD_* among them) with the conversions of their
// values into the setting's spelling, and the HOROVOD_* variables herd cannot
// honour (kUnhonoured, kPerCollectiveGpuVariables), which read_config notes
// as warnings.
#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "src/config.h"
#include "src/config_table.h"

namespace herd::detail::config_table {
namespace {

// Aliases: variables of other frameworks that stand for a setting, so that
// their jobs run unchanged. An alias's value is turned into the setting's
// spelling and checked by the setting's parser under the alias's name. The
// units are herd's already: Horovod's fusion threshold is in bytes, its
// cycle time in milliseconds and its stall times in seconds.

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

}  // namespace

std::vector<std::pair<const char*, Conversion>> variables_for(const Setting& setting) {
  std::vector<std::pair<const char*, Conversion>> sources = {{setting.variable, &same_spelling}};
  if (setting.alias != nullptr) sources.emplace_back(setting.alias, &same_spelling);
  for (const Alias& alias : kAliases) {
    if (std::string_view(alias.setting) == setting.variable) {
      sources.emplace_back(alias.variable, alias.convert);
    }
  }
  return sources;
}

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

}  // namespace herd::detail::config_table

namespace herd::detail {

std::vector<AliasDoc> alias_docs() {
  std::vector<AliasDoc> docs;
  for (const config_table::Setting& setting : config_table::kSettings) {
    if (setting.alias != nullptr) docs.push_back({setting.alias, setting.variable});
  }
  for (const config_table::Alias& alias : config_table::kAliases) {
    docs.push_back({alias.variable, alias.setting});
  }
  return docs;
}

std::vector<std::string> unhonoured_horovod_variables() {
  std::vector<std::string> names;
  for (const config_table::UnhonouredVariable& unhonoured : config_table::kUnhonoured) {
    names.emplace_back(unhonoured.variable);
  }
  names.insert(names.end(), config_table::kPerCollectiveGpuVariables.begin(),
               config_table::kPerCollectiveGpuVariables.end());
  return names;
}

}  // namespace herd::detail
