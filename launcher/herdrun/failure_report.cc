#include "launcher/herdrun/failure_report.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <string>

namespace herd::launcher {
namespace {

std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return result;
}

std::string_view trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string_view::npos) return {};
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// Reads a decimal integer at the start of `text`; advances past it.
std::optional<int> read_int(std::string_view* text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (error != std::errc()) return std::nullopt;
  text->remove_prefix(static_cast<size_t>(end - text->data()));
  return value;
}

// The integer after the first `marker` in `line`.
std::optional<int> int_after(std::string_view line, std::string_view marker) {
  const auto at = line.find(marker);
  if (at == std::string_view::npos) return std::nullopt;
  line.remove_prefix(at + marker.size());
  while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
  return read_int(&line);
}

// Whether a line a rank wrote to stderr says something failed. herd's own
// log lines ("[herd 1] WARN: ...") count only at the error level.
bool reads_as_error(std::string_view text) {
  if (text.rfind("[herd", 0) == 0) return text.find("] ERROR:") != std::string_view::npos;
  const std::string line = lower(text);
  for (const char* word : {"error", "exception", "fatal", "abort", "failed", "what():", "killed",
                           "segmentation fault"}) {
    if (line.find(word) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

std::optional<TaggedLine> parse_tagged_line(std::string_view line) {
  // "[1,R]<stream>:text"
  if (line.empty() || line.front() != '[') return std::nullopt;
  std::string_view rest = line.substr(1);
  if (!read_int(&rest) || rest.empty() || rest.front() != ',') return std::nullopt;
  rest.remove_prefix(1);
  const auto rank = read_int(&rest);
  if (!rank || rest.substr(0, 2) != "]<") return std::nullopt;
  rest.remove_prefix(2);
  const auto close = rest.find(">:");
  if (close == std::string_view::npos) return std::nullopt;
  TaggedLine tagged;
  tagged.rank = *rank;
  tagged.is_stderr = rest.substr(0, close) == "stderr";
  tagged.text = rest.substr(close + 2);
  return tagged;
}

void FailureReport::rank_line(int rank, bool is_stderr, std::string_view text) {
  ++lines_seen_;
  if (!is_stderr) return;
  RankOutput& output = ranks_[rank];
  if (!output.error_line.empty()) return;
  const std::string_view line = trim(text);
  // herd's log lines below the error level are no failure of the rank.
  const bool herd_notice = line.rfind("[herd", 0) == 0 && !reads_as_error(line);
  if (output.first_line.empty() && !herd_notice) output.first_line = std::string(line);

  using Pending = RankOutput::Pending;
  if (output.pending == Pending::kTraceback) {
    // The frames are indented; the exception's own line is not.
    if (line.empty() || text.front() == ' ' || text.front() == '\t') return;
    output.error_line = std::string(line);
    output.order = lines_seen_;
    return;
  }
  if (output.pending == Pending::kTerminate) {
    output.pending = Pending::kNone;
    if (line.rfind("what():", 0) == 0) {
      output.error_line = output.pending_text + ": " + std::string(line);
      output.order = lines_seen_;
      return;
    }
    output.error_line = output.pending_text;
    output.order = lines_seen_;
    return;
  }
  if (line.rfind("Traceback (most recent call last)", 0) == 0) {
    output.pending = Pending::kTraceback;
    output.order = lines_seen_;
    return;
  }
  if (line.rfind("terminate called after throwing", 0) == 0) {
    output.pending = Pending::kTerminate;
    output.pending_text = std::string(line);
    output.order = lines_seen_;
    return;
  }
  if (reads_as_error(line)) {
    output.error_line = std::string(line);
    output.order = lines_seen_;
  }
}

void FailureReport::mpirun_line(std::string_view line) {
  if (reported_rank_ && !expecting_exit_code_) return;
  const std::string_view text = trim(line);
  if (expecting_exit_code_) {
    if (auto code = int_after(text, "Exit code:")) {
      reported_cause_ = "exited with code " + std::to_string(*code);
      expecting_exit_code_ = false;
    }
    return;
  }
  // "Process name: [[29438,1],1]", then "Exit code:    3"
  if (text.rfind("Process name: [[", 0) == 0) {
    if (auto rank = int_after(text, "],")) {
      reported_rank_ = *rank;
      expecting_exit_code_ = true;
    }
    return;
  }
  // "mpirun noticed that process rank 1 with PID 0 on node vm exited on signal 9 (Killed)."
  if (text.find("noticed that process rank") != std::string_view::npos) {
    if (auto rank = int_after(text, "process rank ")) {
      reported_rank_ = *rank;
      const auto signal_at = text.find("exited on signal ");
      if (signal_at != std::string_view::npos) {
        // "signal 9 (Killed)"
        std::string_view cause = text.substr(signal_at + std::string_view("exited on ").size());
        if (!cause.empty() && cause.back() == '.') cause.remove_suffix(1);
        reported_cause_ = "was killed by " + std::string(cause);
      }
    }
    return;
  }
  // "MPI_ABORT was invoked on rank 1 in communicator MPI_COMM_WORLD with errorcode 1."
  if (text.rfind("MPI_ABORT was invoked on rank ", 0) == 0) {
    if (auto rank = int_after(text, "on rank ")) {
      reported_rank_ = *rank;
      if (auto code = int_after(text, "errorcode ")) {
        reported_cause_ = "called MPI_Abort with error code " + std::to_string(*code);
      } else {
        reported_cause_ = "called MPI_Abort";
      }
    }
  }
}

std::optional<int> FailureReport::first_failed_rank() const {
  if (reported_rank_) return reported_rank_;
  std::optional<int> first;
  long first_order = 0;
  for (const auto& [rank, output] : ranks_) {
    if (output.order < 0) continue;
    if (!first || output.order < first_order) {
      first = rank;
      first_order = output.order;
    }
  }
  return first;
}

std::string FailureReport::first_error_line(int rank) const {
  const auto found = ranks_.find(rank);
  if (found == ranks_.end()) return {};
  const RankOutput& output = found->second;
  if (!output.error_line.empty()) return output.error_line;
  if (output.pending == RankOutput::Pending::kTerminate) return output.pending_text;
  return output.first_line;
}

std::string FailureReport::summary(int exit_status) const {
  std::string text =
      "herdrun: the job failed (mpirun exited with status " + std::to_string(exit_status) + ").";
  const auto rank = first_failed_rank();
  if (!rank) {
    return text +
           " No rank wrote an error line and mpirun named none; mpirun's own messages "
           "above say what it saw.";
  }
  text += " Rank " + std::to_string(*rank) + " failed first";
  if (reported_rank_ && !reported_cause_.empty()) text += ": it " + reported_cause_;
  text += ".";
  const std::string line = first_error_line(*rank);
  if (line.empty()) {
    text += " It wrote nothing to stderr.";
  } else {
    text += " Its first error line: " + line;
  }
  return text;
}

}  // namespace herd::launcher
