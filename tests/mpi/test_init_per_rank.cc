// herd::init with settings that differ from rank to rank, each set by the
// program on chosen ranks before init (the program owns MPI, so a failed init
// leaves it usable for the next case):
// - a bad value on some ranks fails init on every rank, naming each such rank
//   and its value (rather than failing that rank alone while the others wait
//   for it);
// - compared settings that differ print as spelled: "auto", "NCCL";
// - HERD_EAGER_PIECE_BYTES on one rank only, the others at auto: init and an
//   allreduce over MPI work (every rank makes the same collective calls);
// - an unknown HERD_* variable is warned about once per process, naming the
//   closest setting, however often init runs.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
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

// Sets `variable` on the ranks listed (to the value paired with each), unsets
// it elsewhere.
void set_on(const Job& job, const char* variable,
            const std::vector<std::pair<int, std::string>>& values) {
  unsetenv(variable);
  for (const auto& [rank, value] : values) {
    if (rank == job.rank) setenv(variable, value.c_str(), 1);
  }
}

// init must throw on every rank with exactly `expected`, and leave herd down.
void expect_init_fails(const Job& job, const std::string& case_name, const std::string& expected) {
  const std::string message = error_of([] { herd::init(); });
  job.rec.check(message == expected, case_name,
                "expected \"" + expected + "\", got \"" + message + "\"");
  job.rec.check(!herd::is_initialized(), case_name, "herd is initialized after a failed init");
  if (herd::is_initialized()) herd::shutdown();
}

void test_bad_values(const Job& job) {
  const int last = job.size - 1;
  set_on(job, "HERD_FUSION_THRESHOLD", {{last, "abc"}});
  expect_init_fails(job, "a bad value on the last rank",
                    "herd::init: on rank " + std::to_string(last) +
                        ", HERD_FUSION_THRESHOLD='abc': expected a non-negative integer (bytes)");
  if (job.size > 1) {
    set_on(job, "HERD_CYCLE_TIME", {{0, "-1"}});
    expect_init_fails(job, "bad values on the first and the last rank",
                      "herd::init: on rank 0, HERD_CYCLE_TIME='-1': expected a non-negative number "
                      "of milliseconds; on rank " +
                          std::to_string(last) +
                          ", HERD_FUSION_THRESHOLD='abc': expected a non-negative integer (bytes)");
    unsetenv("HERD_CYCLE_TIME");
  }
  unsetenv("HERD_FUSION_THRESHOLD");
}

void test_mismatch_text(const Job& job) {
  set_on(job, "HERD_SMALL_ALLREDUCE_BYTES", {{0, "0"}});
  set_on(job, "HERD_GPU_ALLREDUCE", {{0, "mpi"}});
  std::string small = "HERD_SMALL_ALLREDUCE_BYTES differs across ranks: rank 0 0";
  std::string gpu = "HERD_GPU_ALLREDUCE differs across ranks: rank 0 MPI";
  for (int r = 1; r < job.size; ++r) {
    small += ", rank " + std::to_string(r) + " auto";
    gpu += ", rank " + std::to_string(r) + " NCCL";
  }
  expect_init_fails(job, "auto and NCCL spelled out",
                    "herd::init: " + small + "; " + gpu + "; every rank must use the same value");
  unsetenv("HERD_SMALL_ALLREDUCE_BYTES");
  unsetenv("HERD_GPU_ALLREDUCE");
}

// Runs `body` with this process's stderr going to a file; returns what it
// wrote there.
std::string capture_stderr(const Job& job, const std::function<void()>& body) {
  const std::string path = "test_init_per_rank." + std::to_string(getpid()) + ".stderr";
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

// An allreduce large enough to be cut into eager pieces of 1000 bytes (more
// than 1000, at most 2000 bytes a message) through MPI, not shared memory.
void expect_allreduce(const Job& job, const std::string& case_name) {
  const int64_t n = 450;  // 1800 bytes of int32
  std::vector<int32_t> data(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[i] = static_cast<int32_t>(i * (job.rank + 1));
  CaseCheck c(job.rec, case_name);
  try {
    herd::allreduce("eager", {data.data(), DataType::kInt32, {n}},
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

void test_eager_on_one_rank_and_unknown_variable(const Job& job) {
  set_on(job, "HERD_EAGER_PIECE_BYTES", {{0, "1000"}});
  setenv("HERD_SHM_ALLREDUCE_BYTES", "0", 1);
  setenv("HERD_FUSION_THRESOLD", "1", 1);
  const std::string log = capture_stderr(job, [&] {
    for (int round = 0; round < 2; ++round) {
      const std::string case_name =
          "HERD_EAGER_PIECE_BYTES on rank 0 only, init " + std::to_string(round + 1);
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
  const std::string warning = "[herd " + std::to_string(job.rank) +
                              "] WARN: herd::init: HERD_FUSION_THRESOLD is not a herd setting and "
                              "is ignored; did you mean HERD_FUSION_THRESHOLD?\n";
  job.rec.check(count_of(log, warning) == 1, "unknown variable warned once",
                "expected the line \"" + warning + "\" once in stderr, got \"" + log + "\"");
  unsetenv("HERD_EAGER_PIECE_BYTES");
  unsetenv("HERD_SHM_ALLREDUCE_BYTES");
  unsetenv("HERD_FUSION_THRESOLD");
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_init_per_rank", world.rank);
  const Job job{rec, world.rank, world.size};
  for (const char* variable :
       {"HERD_FUSION_THRESHOLD", "HERD_CYCLE_TIME", "HERD_SMALL_ALLREDUCE_BYTES",
        "HERD_GPU_ALLREDUCE", "HERD_EAGER_PIECE_BYTES", "HERD_SHM_ALLREDUCE_BYTES"}) {
    unsetenv(variable);
  }
  test_bad_values(job);
  if (job.size > 1) test_mismatch_text(job);
  test_eager_on_one_rank_and_unknown_variable(job);
  return finish_program_owned_mpi(rec);
}
