// The warnings about HERD_* variables that are not settings: the variables
// herd's tools read (kToolVariables), which draw none, and the closest known
// name by edit distance for the others.
#include <algorithm>
#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "src/config.h"
#include "src/config_table.h"

namespace herd::detail {
namespace {

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

std::vector<std::string> unknown_variable_warnings(const std::vector<std::string>& names) {
  std::vector<std::string_view> known;
  for (const config_table::Setting& setting : config_table::kSettings) {
    known.emplace_back(setting.variable);
  }
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

}  // namespace herd::detail
