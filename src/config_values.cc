// The strict parsers of settings' values and the spellings of the values
// the ranks compare (config_table.h), shared by the settings table and the
// aliases.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "src/config.h"
#include "src/config_table.h"

namespace herd::detail::config_table {

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

}  // namespace herd::detail::config_table
