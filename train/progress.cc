#include "herd/train/progress.h"

#include <unistd.h>

#include "herd/error.h"

namespace herd {
namespace {

// Redraws in place faster than this flicker and cost a write each.
constexpr std::chrono::milliseconds kRedrawInterval{100};

}  // namespace

ProgressMode parse_progress_mode(const std::string& text) {
  if (text == "auto") return ProgressMode::kAuto;
  if (text == "always") return ProgressMode::kAlways;
  if (text == "never") return ProgressMode::kNever;
  throw Error("progress mode '" + text + "': expected auto, always or never",
              ErrorKind::kInvalidArgument);
}

ProgressStyle progress_style(ProgressMode mode, bool is_terminal) {
  switch (mode) {
    case ProgressMode::kNever: return ProgressStyle::kOff;
    case ProgressMode::kAlways: return ProgressStyle::kInPlace;
    case ProgressMode::kAuto: break;
  }
  return is_terminal ? ProgressStyle::kInPlace : ProgressStyle::kLines;
}

bool is_terminal(std::FILE* stream) { return isatty(fileno(stream)) == 1; }

ProgressDisplay::ProgressDisplay(std::FILE* stream, ProgressStyle style, Clock::duration interval,
                                 Clock::time_point start)
    : stream_(stream),
      style_(style),
      interval_(interval),
      next_(style == ProgressStyle::kLines ? start + interval : start) {}

ProgressDisplay::~ProgressDisplay() { clear(); }

bool ProgressDisplay::due(Clock::time_point now) const { return on() && now >= next_; }

void ProgressDisplay::show(const std::string& text, Clock::time_point now) {
  if (!due(now)) return;
  if (style_ == ProgressStyle::kInPlace) {
    std::fprintf(stream_, "\r%s\033[K", text.c_str());
    line_shown_ = true;
    next_ = now + kRedrawInterval;
  } else {
    std::fprintf(stream_, "%s\n", text.c_str());
    next_ = now + interval_;
  }
  std::fflush(stream_);
}

void ProgressDisplay::clear() {
  if (!line_shown_) return;
  std::fprintf(stream_, "\r\033[K");
  std::fflush(stream_);
  line_shown_ = false;
  next_ = Clock::time_point::min();
}

}  // namespace herd
