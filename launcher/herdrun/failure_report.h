// Which rank of a failed job failed first, and why, from what mpirun printed:
// the ranks' lines (labelled by --tag-output) and mpirun's own report ("The
// first process to do so was: Process name: [[j,1],R] Exit code: C", "process
// rank R ... exited on signal S (Name)", "MPI_ABORT was invoked on rank R").
//
// Fed line by line while the job runs (output_relay.h), asked once it has
// ended; one per launch.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace herd::launcher {

// A line as Open MPI's --tag-output writes it: "[1,R]<stderr>:text".
struct TaggedLine {
  int rank = -1;
  bool is_stderr = false;
  std::string_view text;
};

// The rank, stream and text of a tagged line; nullopt for an untagged one
// (mpirun's own messages).
std::optional<TaggedLine> parse_tagged_line(std::string_view line);

class FailureReport {
 public:
  // One line of a rank (without its label).
  void rank_line(int rank, bool is_stderr, std::string_view text);
  // One line mpirun wrote itself.
  void mpirun_line(std::string_view line);

  // The rank mpirun names as the first to fail, else the first rank that
  // wrote an error line; nullopt when neither is known.
  std::optional<int> first_failed_rank() const;
  // The first error line of `rank`; empty when it wrote none.
  std::string first_error_line(int rank) const;

  // One paragraph: the first failed rank, how it ended and its first error
  // line. `exit_status` is mpirun's (the shell's convention: 128+S for a
  // signal).
  std::string summary(int exit_status) const;

 private:
  struct RankOutput {
    std::string error_line;  // the first line that reads as an error
    std::string first_line;  // its first stderr line, when none does
    // A Python traceback or a C++ terminate message is waiting for the line
    // that says what went wrong.
    enum class Pending { kNone, kTraceback, kTerminate } pending = Pending::kNone;
    std::string pending_text;
    long order = -1;  // when the error line came, among every rank's
  };

  std::map<int, RankOutput> ranks_;
  long lines_seen_ = 0;
  std::optional<int> reported_rank_;  // the rank mpirun named
  std::string reported_cause_;        // "exited with code 3", "was killed by signal 9 (Killed)"
  bool expecting_exit_code_ = false;  // after "Process name: [[j,1],R]"
};

}  // namespace herd::launcher
