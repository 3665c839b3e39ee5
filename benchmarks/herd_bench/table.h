// herd-bench's output: byte sizes on the command line and in progress lines,
// and the result table (nccl-tests' columns) as aligned text or CSV.
//
// Called by the benchmark's main thread on rank 0 only (parse_bytes on every
// rank); no shared state.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>

namespace herd::bench {

// "4096", "4K", "64M", "1G" (binary multiples, either case; a trailing "B" or
// "iB" is allowed) -> bytes. Throws std::invalid_argument on anything else.
int64_t parse_bytes(const std::string& text);

// 1048576 -> "1 MiB", 1536 -> "1.5 KiB", 100 -> "100 B".
std::string format_bytes(int64_t bytes);

// One measured row. Fields that do not apply to a path (the memcpy row has no
// reduction, no bus and no check) are empty and print as "-" (empty in CSV).
struct Row {
  int64_t bytes = 0;
  int64_t count = 0;
  std::string type;
  std::string redop;
  std::string path;
  double time_us = 0;                // the slowest rank's average per iteration
  double algbw_gbps = 0;             // bytes / time, in 1e9 bytes per second
  std::optional<double> busbw_gbps;  // algbw scaled by the collective's bus factor
  std::optional<int64_t> wrong;      // elements that differ from the closed form
};

class Table {
 public:
  Table(std::FILE* out, bool csv) : out_(out), csv_(csv) {}
  void print_header() const;
  void print_row(const Row& row) const;
  // A "# ..." comment line: in the table in text mode, on stderr in CSV mode
  // so that the CSV stays machine-readable.
  void print_note(const std::string& note) const;

 private:
  std::FILE* out_;
  bool csv_;
};

}  // namespace herd::bench
