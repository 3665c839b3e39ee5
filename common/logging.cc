#include "common/logging.h"

#include <atomic>
#include <cstdio>

namespace herd {

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "trace";
    case LogLevel::kDebug: return "debug";
    case LogLevel::kInfo: return "info";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kError: return "error";
    case LogLevel::kOff: return "off";
  }
  return "unknown";
}

namespace logging {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kWarning};
std::atomic<int> g_rank{-1};

const char* tag(LogLevel level) {
  switch (level) {
    case LogLevel::kTrace: return "TRACE";
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARN";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF";
  }
  return "?";
}

}  // namespace

void set_level(LogLevel level) { g_level.store(level); }
LogLevel level() { return g_level.load(); }
void set_rank(int rank) { g_rank.store(rank); }
bool enabled(LogLevel level) { return level >= g_level.load() && level != LogLevel::kOff; }

void write(LogLevel level, const std::string& message) {
  const int rank = g_rank.load();
  std::string line = rank >= 0 ? fmt::format("[herd {}] {}: {}\n", rank, tag(level), message)
                               : fmt::format("[herd] {}: {}\n", tag(level), message);
  std::fputs(line.c_str(), stderr);
}

}  // namespace logging
}  // namespace herd
