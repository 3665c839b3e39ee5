// What each rank writes to its stderr, read back from the files mpirun's
// --output-filename DIR keeps of it (DIR/<job>/rank.<R>/stderr, beside its
// usual output on the terminal), line by line into the failure report.
//
// Read while the job runs (herdrun polls every few tenths of a second), so
// that the report knows which rank wrote an error first, and once more when
// the job has ended. Ranks on other machines write their files there: their
// lines are known only where DIR is on a file system the machines share.
#pragma once

#include <map>
#include <string>

#include "launcher/herdrun/failure_report.h"

namespace herd::launcher {

class RankLogs {
 public:
  explicit RankLogs(std::string directory) : directory_(std::move(directory)) {}

  // Reads what the ranks' files gained since the last call; complete lines
  // go to `report`. `final`: the job has ended, a last line without its
  // newline goes too.
  void poll(FailureReport* report, bool final = false);

 private:
  struct File {
    int rank = -1;
    long long offset = 0;  // bytes read so far
    std::string partial;   // the start of a line not yet complete
  };

  std::string directory_;
  std::map<std::string, File> files_;  // by path
};

// The rank of a path ".../rank.<R>/stderr", or -1 for any other path.
int rank_of_stderr_file(const std::string& path);

}  // namespace herd::launcher
