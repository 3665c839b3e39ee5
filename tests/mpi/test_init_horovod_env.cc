// herd::init with Horovod's HOROVOD_* variables, each set by the program on
// chosen ranks before init (the program owns MPI, so a failed init leaves it
// usable for the next case):
// - a bad alias value on one rank fails init on every rank, naming the rank,
//   the HOROVOD_* variable and its value;
// - valid aliases reach the running job: HOROVOD_LOG_LEVEL=INFO makes init
//   log its "started" line, which shows the fusion threshold and cycle time
//   HOROVOD_FUSION_THRESHOLD and HOROVOD_CYCLE_TIME gave, and an allreduce
//   runs; a HERD_* variable beside its alias wins and init says so at info;
//   HOROVOD_CONTROLLER=gloo is warned about once per process, however often init
//   runs; HOROVOD_DYNAMIC_PROCESS_SETS=1 and HOROVOD_TIMELINE=DYNAMIC are
//   accepted without a word;
// - an alias of a compared setting on one rank only fails init on every rank
//   as the HERD_* variable would.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <mpi.h>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

struct Job {
  Recorder& rec;
  int rank;
  int size;
};

// Every variable a case sets; unset before each case.
constexpr const char* kVariables[] = {
    "HERD_LOG_LEVEL",
    "HERD_FUSION_THRESHOLD",
    "HERD_CYCLE_TIME",
    "HERD_CACHE_CAPACITY",
    "HOROVOD_LOG_LEVEL",
    "HOROVOD_FUSION_THRESHOLD",
    "HOROVOD_CYCLE_TIME",
    "HOROVOD_CACHE_CAPACITY",
    "HOROVOD_CONTROLLER",
    "HOROVOD_TIMELINE",
    "HOROVOD_DYNAMIC_PROCESS_SETS",
};

void unset_all() {
  for (const char* variable : kVariables) unsetenv(variable);
}

// init must throw on every rank with exactly `expected`, and leave herd down.
void expect_init_fails(const Job& job, const std::string& case_name, const std::string& expected) {
  const std::string message = error_of([] { herd::init(); });
  job.rec.check(message == expected, case_name,
                "expected \"" + expected + "\", got \"" + message + "\"");
  job.rec.check(!herd::is_initialized(), case_name, "herd is initialized after a failed init");
  if (herd::is_initialized()) herd::shutdown();
}

void test_bad_alias_on_one_rank(const Job& job) {
  unset_all();
  const int last = job.size - 1;
  if (job.rank == last) setenv("HOROVOD_FUSION_THRESHOLD", "abc", 1);
  expect_init_fails(job, "HOROVOD_FUSION_THRESHOLD=abc on the last rank",
                    "herd::init: on rank " + std::to_string(last) +
                        ", HOROVOD_FUSION_THRESHOLD='abc': expected a non-negative integer "
                        "(bytes)");
  unset_all();
}

void test_alias_compared_across_ranks(const Job& job) {
  unset_all();
  if (job.rank == 0) setenv("HOROVOD_FUSION_THRESHOLD", "0", 1);
  std::string values = "rank 0 0";
  for (int r = 1; r < job.size; ++r) values += ", rank " + std::to_string(r) + " 4194304";
  expect_init_fails(job, "HOROVOD_FUSION_THRESHOLD=0 on rank 0 only",
                    "herd::init: HERD_FUSION_THRESHOLD differs across ranks: " + values +
                        "; every rank must use the same value");
  unset_all();
}

// Runs `body` with this process's stderr going to a file; returns what it
// wrote there.
std::string capture_stderr(const Job& job, const std::function<void()>& body) {
  const std::string path = "test_init_horovod_env." + std::to_string(getpid()) + ".stderr";
  std::fflush(stderr);
  const int saved = dup(2);
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (saved < 0 || file < 0) {
    job.rec.fail("capture stderr", "cannot redirect stderr to " + path);
    body();
    return "";
  }
  dup2(file, 2);
  close(file);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  unlink(path.c_str());
  return text.str();
}

int count_of(const std::string& text, const std::string& part) {
  int count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) {
    ++count;
  }
  return count;
}

// An int32 sum over every rank, against its closed form.
void expect_allreduce(const Job& job, const std::string& case_name) {
  const int64_t n = 1000;
  std::vector<int32_t> data(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<int32_t>(i * (job.rank + 1));
  CaseCheck c(job.rec, case_name);
  try {
    herd::allreduce("horovod_env", {data.data(), DataType::kInt32, {n}},
                    {data.data(), DataType::kInt32, {n}}, ReduceOp::kSum);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  // sum over r of i * (r + 1) = i * size * (size + 1) / 2
  for (int64_t i = 0; i < n; ++i) {
    const int64_t expected = i * job.size * (job.size + 1) / 2;
    if (data[i] != expected) c.mismatch(i, std::to_string(expected), std::to_string(data[i]));
  }
}

void test_aliases_in_effect(const Job& job) {
  unset_all();
  setenv("HOROVOD_LOG_LEVEL", "INFO", 1);
  setenv("HOROVOD_FUSION_THRESHOLD", "65536", 1);
  setenv("HOROVOD_CYCLE_TIME", "2.5", 1);
  setenv("HERD_CACHE_CAPACITY", "16", 1);
  setenv("HOROVOD_CACHE_CAPACITY", "8", 1);
  setenv("HOROVOD_CONTROLLER", "gloo", 1);
  setenv("HOROVOD_DYNAMIC_PROCESS_SETS", "1", 1);
  setenv("HOROVOD_TIMELINE", "DYNAMIC", 1);
  const std::string log = capture_stderr(job, [&] {
    for (int round = 0; round < 2; ++round) {
      const std::string case_name = "aliases in effect, init " + std::to_string(round + 1);
      try {
        herd::init();
      } catch (const herd::Error& e) {
        job.rec.fail(case_name, std::string("init threw: ") + e.what());
        continue;
      }
      expect_allreduce(job, case_name);
      herd::shutdown();
    }
  });
  const std::string prefix = "[herd " + std::to_string(job.rank) + "] ";
  const std::string started = prefix + "INFO: started: rank " + std::to_string(job.rank) + " of " +
                              std::to_string(job.size) + ", ";
  const std::string settings = ", fusion threshold 65536 bytes, cycle 2.5 ms\n";
  int started_lines = 0;
  std::istringstream lines(log);
  std::string line;
  while (std::getline(lines, line)) {
    line += '\n';
    if (line.rfind(started, 0) == 0 && count_of(line, settings) == 1) ++started_lines;
  }
  job.rec.check(
      started_lines == 2, "HOROVOD_LOG_LEVEL, HOROVOD_FUSION_THRESHOLD, HOROVOD_CYCLE_TIME",
      "expected two lines \"" + started + "..." + settings + "\" in stderr, got \"" + log + "\"");
  const std::string choice = prefix +
                             "INFO: herd::init: HERD_CACHE_CAPACITY: herd uses "
                             "HERD_CACHE_CAPACITY='16' and ignores HOROVOD_CACHE_CAPACITY='8'\n";
  job.rec.check(count_of(log, choice) == 2, "HERD_CACHE_CAPACITY wins, said at each init",
                "expected the line \"" + choice + "\" twice in stderr, got \"" + log + "\"");
  const std::string controller = prefix +
                                 "WARN: herd::init: HOROVOD_CONTROLLER='gloo' is ignored: herd's "
                                 "ranks coordinate over MPI only; it has no Gloo\n";
  job.rec.check(count_of(log, controller) == 1, "HOROVOD_CONTROLLER warned once",
                "expected the line \"" + controller + "\" once in stderr, got \"" + log + "\"");
  job.rec.check(count_of(log, "WARN: herd::init: HOROVOD_") == 1,
                "HOROVOD_DYNAMIC_PROCESS_SETS and HOROVOD_TIMELINE=DYNAMIC accepted silently",
                "expected no warning but HOROVOD_CONTROLLER's in stderr, got \"" + log + "\"");
  unset_all();
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_init_horovod_env", world.rank);
  const Job job{rec, world.rank, world.size};
  test_bad_alias_on_one_rank(job);
  if (job.size > 1) test_alias_compared_across_ranks(job);
  test_aliases_in_effect(job);
  return finish_program_owned_mpi(rec);
}
