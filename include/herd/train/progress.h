// herd::ProgressDisplay: a training loop's progress on one stream (rank 0's
// stderr), readable on a terminal and in a log alike.
//
// On a terminal the display is one line redrawn in place ('\r' and an erase
// to the end of the line), at most every 100 ms. Anywhere else (a pipe to
// mpirun, a file) a line with a newline is written every `interval`, so a
// log under mpirun grows by a few lines a minute instead of thousands of
// carriage returns. The caller asks due() before it builds the text, so a
// step that shows nothing formats nothing. Not thread-safe: one training
// thread updates it.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

namespace herd {

// --progress of herd-train and herd-bench.
enum class ProgressMode {
  kAuto,    // in place on a terminal, a line every interval elsewhere
  kAlways,  // in place even where the stream is not a terminal (a terminal behind mpirun)
  kNever,
};

// "auto", "always" or "never"; throws herd::Error (invalid argument) naming
// the text otherwise.
ProgressMode parse_progress_mode(const std::string& text);

enum class ProgressStyle { kOff, kInPlace, kLines };

// How a display in `mode` writes to a stream that is (or is not) a terminal.
ProgressStyle progress_style(ProgressMode mode, bool is_terminal);

// Whether `stream` is a terminal.
bool is_terminal(std::FILE* stream);

class ProgressDisplay {
 public:
  using Clock = std::chrono::steady_clock;

  // `interval`: the time between two lines in the kLines style (and before
  // the first one, so that a run shorter than that prints none).
  ProgressDisplay(std::FILE* stream, ProgressStyle style,
                  Clock::duration interval = std::chrono::seconds(5),
                  Clock::time_point start = Clock::now());
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;
  // Clears an in-place line left shown.
  ~ProgressDisplay();

  ProgressStyle style() const { return style_; }
  bool on() const { return style_ != ProgressStyle::kOff; }

  // Whether show() at `now` would write.
  bool due(Clock::time_point now = Clock::now()) const;
  // Shows `text` (one line, without a newline) if due at `now`.
  void show(const std::string& text, Clock::time_point now = Clock::now());
  // Erases the in-place line (before other output goes to the terminal);
  // the next show() draws again at once. Nothing in the other styles.
  void clear();

 private:
  std::FILE* stream_;
  ProgressStyle style_;
  Clock::duration interval_;
  Clock::time_point next_;   // when show() writes next
  bool line_shown_ = false;  // in place: a line is on the terminal
};

}  // namespace herd
