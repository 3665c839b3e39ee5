// What the files behind config.h share: the table of settings (one row per
// HERD_* variable, config_settings.cc), the strict parsers and spellings of
// values its rows use (config_values.cc), and the variables of other
// frameworks that can give a setting (config_aliases.cc). Not for use outside
// those files and config.cc; everything else reads settings through config.h.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/logging.h"
#include "common/status.h"
#include "src/config.h"

namespace herd::detail::config_table {

// Strict parsers of a variable's text: nullopt for anything but the exact
// spelling (no sign where none is allowed, no whitespace, no unit suffix).
std::optional<int64_t> parse_integer(std::string_view text, int64_t min, int64_t max);
std::optional<double> parse_non_negative_decimal(std::string_view text);
std::string lowercase(std::string_view text);
// trace, debug, info, warning, error or off, in any letter case.
std::optional<LogLevel> parse_log_level(std::string_view text);
// "0,2;1,3" -> {{0,2},{1,3}}; "" -> {}.
std::optional<std::vector<std::vector<int>>> parse_rank_lists(std::string_view text);

// "<variable>='<text>': expected <expected>".
Status bad_value(const char* variable, std::string_view text, std::string_view expected);

// Agreed integers as their variables spell them (AgreedSetting::text).
std::string decimal_text(int64_t value);
// The settings whose "auto" is stored as -1.
std::string auto_or_decimal_text(int64_t value);
std::string gpu_allreduce_text(int64_t value);
std::string allreduce_algorithm_text(int64_t value);
std::string hierarchical_allreduce_text(int64_t value);
std::string hierarchical_allgather_text(int64_t value);

using Parser = Status (*)(const char* variable, std::string_view text, Config* config);
// The setting's value as an integer, for settings every rank must give the
// same value (AgreedSetting in config.h).
using AgreedValue = int64_t (*)(const Config& config);
// The column's value for settings the ranks may give different values.
constexpr AgreedValue kMayDiffer = nullptr;
// An agreed integer as the variable spells it (AgreedSetting::text).
using ValueText = std::string (*)(int64_t value);

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

// The one list of settings, in the order docs/configuration.md shows them.
extern const std::array<Setting, 30> kSettings;

// Sets *setting_text to the setting's spelling of an alias's `text`, or to
// nullopt when the value asks for nothing (the setting keeps its value).
using Conversion = Status (*)(const char* variable, std::string_view text,
                              std::optional<std::string>* setting_text);

// The variables that can give `setting`, in the order they win: its own
// variable, its Setting::alias, then its other frameworks' aliases, each with
// the conversion of its value into the setting's spelling.
std::vector<std::pair<const char*, Conversion>> variables_for(const Setting& setting);

// ConfigNotes::warnings for the environment and the settings read from it.
std::vector<std::string> unhonoured_warnings(const EnvLookup& env, const Config& config);

}  // namespace herd::detail::config_table
