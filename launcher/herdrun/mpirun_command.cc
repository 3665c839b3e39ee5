#include "launcher/herdrun/mpirun_command.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>
#include <string_view>

namespace herd::launcher {
namespace {

constexpr int64_t kBytesPerMegabyte = 1024 * 1024;

// A decimal as short as it reads: 100, 0.5, 2.25.
std::string decimal(double value) {
  std::ostringstream out;
  out.precision(15);
  out << value;
  return out.str();
}

bool forwarded_from_environment(const std::string& name) {
  return name.rfind("HERD_", 0) == 0 || name.rfind("HOROVOD_", 0) == 0;
}

// Variables a rank on another machine needs to find the program and its
// libraries; a rank on this machine inherits them from mpirun anyway.
bool forwarded_to_remote_hosts(const std::string& name) {
  return name == "PATH" || name == "LD_LIBRARY_PATH" || name == "PYTHONPATH";
}

bool needs_no_quotes(const std::string& word) {
  return !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view("-_./=:,+%@").find(c) != std::string_view::npos;
  });
}

}  // namespace

Environment herd_settings(const LaunchOptions& options) {
  Environment settings;
  if (options.fusion_threshold_mb) {
    settings.emplace_back("HERD_FUSION_THRESHOLD",
                          std::to_string(*options.fusion_threshold_mb * kBytesPerMegabyte));
  }
  if (options.cycle_time_ms)
    settings.emplace_back("HERD_CYCLE_TIME", decimal(*options.cycle_time_ms));
  if (options.cache_capacity) {
    settings.emplace_back("HERD_CACHE_CAPACITY", std::to_string(*options.cache_capacity));
  }
  if (options.hierarchical_allreduce) settings.emplace_back("HERD_HIERARCHICAL_ALLREDUCE", "1");
  if (options.no_hierarchical_allreduce) {
    settings.emplace_back("HERD_HIERARCHICAL_ALLREDUCE", "0");
  }
  if (options.hierarchical_allgather) settings.emplace_back("HERD_HIERARCHICAL_ALLGATHER", "1");
  if (options.no_hierarchical_allgather) {
    settings.emplace_back("HERD_HIERARCHICAL_ALLGATHER", "0");
  }
  if (options.timeline_filename) settings.emplace_back("HERD_TIMELINE", *options.timeline_filename);
  if (options.timeline_mark_cycles) settings.emplace_back("HERD_TIMELINE_MARK_CYCLES", "1");
  if (options.autotune) settings.emplace_back("HERD_AUTOTUNE", "1");
  if (options.autotune_log_file)
    settings.emplace_back("HERD_AUTOTUNE_LOG", *options.autotune_log_file);
  if (options.autotune_warmup_samples) {
    settings.emplace_back("HERD_AUTOTUNE_WARMUP_SAMPLES",
                          std::to_string(*options.autotune_warmup_samples));
  }
  if (options.autotune_steps_per_sample) {
    settings.emplace_back("HERD_AUTOTUNE_STEPS_PER_SAMPLE",
                          std::to_string(*options.autotune_steps_per_sample));
  }
  if (options.no_stall_check) {
    settings.emplace_back("HERD_STALL_CHECK_TIME", "0");
    settings.emplace_back("HERD_STALL_SHUTDOWN_TIME", "0");
  } else {
    if (options.stall_check_seconds) {
      settings.emplace_back("HERD_STALL_CHECK_TIME", decimal(*options.stall_check_seconds));
    }
    if (options.stall_shutdown_seconds) {
      settings.emplace_back("HERD_STALL_SHUTDOWN_TIME", decimal(*options.stall_shutdown_seconds));
    }
  }
  if (options.log_level) settings.emplace_back("HERD_LOG_LEVEL", *options.log_level);
  if (options.num_servers > 0) {
    settings.emplace_back("HERD_NUM_SERVERS", std::to_string(options.num_servers));
  }
  return settings;
}

MpirunCommand build_mpirun_command(const LaunchOptions& options, const LaunchContext& context) {
  if (options.command.empty()) {
    throw std::invalid_argument("no command to run: herdrun -np N [options] COMMAND...");
  }
  if (options.num_proc < 1) {
    throw std::invalid_argument("-np " + std::to_string(options.num_proc) +
                                ": the job needs at least 1 rank");
  }
  if (options.num_servers < 0) {
    throw std::invalid_argument("--num-servers " + std::to_string(options.num_servers) +
                                ": must be 0 or more");
  }
  MpirunCommand command;
  auto& argv = command.argv;
  argv.push_back(context.mpirun);
  if (context.root) argv.push_back("--allow-run-as-root");

  const int ranks = options.num_proc + options.num_servers;
  const bool remote = !context.hosts.empty();
  const int slots = remote ? total_slots(context.hosts) : context.cores;
  if (options.oversubscribe || ranks > slots) {
    argv.push_back("--oversubscribe");
    if (!options.oversubscribe) {
      command.notes.push_back(
          "herdrun: " + std::to_string(ranks) + " ranks on " + std::to_string(slots) +
          (remote ? " slots of the hosts" : " cores") +
          ": adding --oversubscribe (ranks share cores, so the job runs slower than on " +
          std::to_string(ranks) + (remote ? " slots)" : " cores)"));
    }
  }
  argv.push_back("-np");
  argv.push_back(std::to_string(ranks));
  if (remote) {
    argv.push_back("-H");
    argv.push_back(mpirun_host_list(context.hosts));
  }
  // herd's background thread and the shared-memory helpers want the cores a
  // rank's threads can reach to be left to the OS unless the user binds.
  if (options.binding_args.empty()) {
    for (const char* word : {"--bind-to", "none", "--map-by", "slot"}) argv.push_back(word);
  } else {
    for (auto& word : split_words(options.binding_args)) argv.push_back(std::move(word));
  }
  if (!context.output_dir.empty()) {
    argv.push_back("--output-filename");
    argv.push_back(context.output_dir);
  }

  Environment settings = herd_settings(options);
  settings.emplace_back("HERD_RESTART_COUNT", std::to_string(context.restart_count));
  auto set_by_herdrun = [&](const std::string& name) {
    return std::any_of(settings.begin(), settings.end(),
                       [&](const auto& setting) { return setting.first == name; });
  };
  std::vector<std::string> inherited;
  for (const auto& [name, value] : context.environment) {
    if (set_by_herdrun(name)) continue;
    if (forwarded_from_environment(name) || (remote && forwarded_to_remote_hosts(name))) {
      inherited.push_back(name);
    }
  }
  std::sort(inherited.begin(), inherited.end());
  inherited.erase(std::unique(inherited.begin(), inherited.end()), inherited.end());
  for (const auto& name : inherited) {
    argv.push_back("-x");
    argv.push_back(name);
  }
  for (const auto& [name, value] : settings) {
    argv.push_back("-x");
    argv.push_back(name + "=" + value);
  }

  for (auto& word : split_words(options.mpi_args)) argv.push_back(std::move(word));
  argv.insert(argv.end(), options.command.begin(), options.command.end());
  return command;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else if (c == '\'') {
      const auto close = text.find('\'', i + 1);
      if (close == std::string::npos) throw std::invalid_argument("an unterminated ' in: " + text);
      word.append(text, i + 1, close - i - 1);
      i = close;
    } else if (c == '"') {
      // Inside double quotes a backslash keeps only \" and \\ special.
      size_t j = i + 1;
      for (; j < text.size() && text[j] != '"'; ++j) {
        if (text[j] == '\\' && j + 1 < text.size() && (text[j + 1] == '"' || text[j + 1] == '\\')) {
          ++j;
        }
        word += text[j];
      }
      if (j >= text.size()) throw std::invalid_argument("an unterminated \" in: " + text);
      i = j;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string line;
  for (const auto& word : argv) {
    if (!line.empty()) line += ' ';
    if (needs_no_quotes(word)) {
      line += word;
      continue;
    }
    line += '\'';
    for (char c : word) {
      if (c == '\'') {
        line += "'\\''";
      } else {
        line += c;
      }
    }
    line += '\'';
  }
  return line;
}

}  // namespace herd::launcher
