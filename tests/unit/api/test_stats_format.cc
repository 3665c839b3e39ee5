// herd::format_stats: the table HERD_STATS=1 prints, against its text
// written out here.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/stats.h"

namespace herd {
namespace {

TEST_CASE("format_stats: a header and one aligned line per entry", "[stats]") {
  CollectiveStats allreduce;
  allreduce.collective = "allreduce";
  allreduce.process_set = 0;
  allreduce.count = 4;
  allreduce.failed = 1;
  allreduce.bytes = 4096;
  allreduce.runs = 2;
  allreduce.total_seconds = 0.002;  // 500 us per operation
  allreduce.run_seconds = 0.0005;
  CollectiveStats grouped;
  grouped.collective = "grouped allreduce";
  grouped.process_set = 3;
  grouped.count = 0;
  grouped.failed = 2;
  const std::string expected =
      "herd stats, rank 1: operations per process set and collective since herd::init\n"
      " set collective             count  failed          bytes      runs     total_ms       "
      "run_ms    mean_us\n"
      "   0 allreduce                  4       1           4096         2        2.000        "
      "0.500      500.0\n"
      "   3 grouped allreduce          0       2              0         0        0.000        "
      "0.000        0.0\n";
  CHECK(format_stats(1, {allreduce, grouped}) == expected);
}

TEST_CASE("format_stats: no operations, the header alone", "[stats]") {
  CHECK(format_stats(0, {}) ==
        "herd stats, rank 0: operations per process set and collective since herd::init\n"
        " set collective             count  failed          bytes      runs     total_ms       "
        "run_ms    mean_us\n");
}

}  // namespace
}  // namespace herd
