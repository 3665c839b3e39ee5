// Leveled logging to stderr, prefixed with the rank: "[herd 1] WARN: ...".
//
// The level comes from HERD_LOG_LEVEL through the runtime's Config; the rank
// is set once by herd::init. Safe to call from any thread: each message is
// written with one fputs call.
#pragma once

#include <string>
#include <utility>

#include <fmt/format.h>

namespace herd {

enum class LogLevel {
  kTrace,
  kDebug,
  kInfo,
  kWarning,
  kError,
  kOff,
};

// "trace", "debug", "info", "warning", "error", "off".
const char* to_string(LogLevel level);

namespace logging {

void set_level(LogLevel level);
LogLevel level();
void set_rank(int rank);
bool enabled(LogLevel level);
void write(LogLevel level, const std::string& message);

}  // namespace logging
}  // namespace herd

// HERD_LOG(kInfo, "allreduce {} bytes", n): formats only when enabled.
#define HERD_LOG(lvl, ...)                                                     \
  do {                                                                         \
    if (::herd::logging::enabled(::herd::LogLevel::lvl))                       \
      ::herd::logging::write(::herd::LogLevel::lvl, fmt::format(__VA_ARGS__)); \
  } while (0)
