// Reading the settings from the environment: read_config walks the settings
// table (config_settings.cc), taking each setting from its own variable or an
// alias (config_aliases.cc), and process_environment and
// herd_variables_in_environment are herd's only readers of the process
// environment. Called from herd::init on the application thread, once,
// before MPI starts.
#include "src/config.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>

#include "src/config_table.h"

namespace herd::detail {

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
  for (const config_table::Setting& setting : config_table::kSettings) {
    // The variables that can give this setting, in the order they win.
    const auto sources = config_table::variables_for(setting);
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
    notes->warnings = config_table::unhonoured_warnings(env, result);
    notes->choices = std::move(choices);
  }
  if (!errors.empty()) return Status::error(fmt::format("{}", fmt::join(errors, "; ")));
  *config = result;
  return Status::ok();
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

}  // namespace herd::detail
