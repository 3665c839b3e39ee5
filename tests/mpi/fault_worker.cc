// One rank of the fault tests (tests/scripts/fault_matrix.py, which starts it
// under mpiexec, signals it and reads what it writes).
//
// Usage: fault_worker OUT_DIR MODE [ELEMENTS [ITERATIONS [PAUSE_MS]]]
//
// Every rank writes OUT_DIR/result.<rank>, one line per event, and
// OUT_DIR/ready.<rank> (its pid) after its first exact result, the driver's
// cue for a fault. Lines:
//   ok <results>                      every result came, all exact
//   wrong <iteration> <index> <value> a result differed from the closed form
//   error <seconds> <message>         an operation threw; seconds since the
//                                     last exact result (or since it began)
//   shutdown <seconds>                how long herd::shutdown took
//   reinit <message>                  what herd::init then threw, after an
//                                     error
//   cpu <cpu seconds> wall <seconds>  (mode slow-peer) the process's CPU time
//                                     and the wall time of the wait
// Modes:
//   loop        allreduce float32[ELEMENTS] ITERATIONS times (0: until one
//               fails), each result checked, PAUSE_MS apart, then
//               herd::shutdown
//   loop-shared loop in place in a herd::SharedBuffer (the shared-memory
//               allreduce's direct path)
//   early-exit  rank 0 returns from main after one allreduce, without
//               herd::shutdown; the others then submit another allreduce
//   shutdown-pending  rank 0 calls herd::shutdown after one allreduce; the
//               others then submit another allreduce
//   slow-peer   rank 0 sleeps 10 s before submitting its allreduce; the
//               others submit at once and wait, measuring their CPU time
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "herd/herd.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double process_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

// One exact-checked allreduce: small integers, so every sum is exact
// whatever the order of additions. Returns false after writing "wrong".
bool reduce_and_check(std::ofstream& out, long iteration, float* input, float* output,
                      int64_t count) {
  const int rank = herd::rank();
  const int size = herd::size();
  for (int64_t j = 0; j < count; ++j) input[j] = static_cast<float>((j + iteration + rank) % 64);
  herd::allreduce("fault/grad", herd::TensorView{input, herd::DataType::kFloat32, {count}},
                  herd::TensorView{output, herd::DataType::kFloat32, {count}},
                  herd::ReduceOp::kSum);
  for (int64_t j = 0; j < count; ++j) {
    double expected = 0;
    for (int r = 0; r < size; ++r) expected += static_cast<double>((j + iteration + r) % 64);
    if (output[j] != expected) {
      out << "wrong " << iteration << " " << j << " " << output[j] << "\n";
      out.flush();
      return false;
    }
  }
  return true;
}

void timed_shutdown(std::ofstream& out) {
  const Clock::time_point start = Clock::now();
  herd::shutdown();
  out << "shutdown " << seconds_since(start) << "\n";
  out.flush();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: fault_worker OUT_DIR MODE [ELEMENTS [ITERATIONS [PAUSE_MS]]]\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  const std::string mode = argv[2];
  const long elements = argc > 3 ? std::stol(argv[3]) : 1024;
  const long iterations = argc > 4 ? std::stol(argv[4]) : 0;
  const long pause_ms = argc > 5 ? std::stol(argv[5]) : 0;
  herd::init();
  const int rank = herd::rank();
  std::ofstream out(out_dir + "/result." + std::to_string(rank));
  std::vector<float> input_vector(static_cast<std::size_t>(elements));
  std::vector<float> output_vector(static_cast<std::size_t>(elements));
  float* input = input_vector.data();
  float* output = output_vector.data();
  herd::SharedBuffer shared;
  if (mode == "loop-shared") {
    shared = herd::SharedBuffer(static_cast<std::size_t>(elements) * sizeof(float));
    input = output = static_cast<float*>(shared.data());
  }
  const int64_t count = elements;
  Clock::time_point last_good = Clock::now();
  long done = 0;
  try {
    if (mode == "loop" || mode == "loop-shared") {
      for (long i = 0; iterations == 0 || i < iterations; ++i) {
        if (!reduce_and_check(out, i, input, output, count)) return 1;
        last_good = Clock::now();
        if (++done == 1) std::ofstream(out_dir + "/ready." + std::to_string(rank)) << getpid();
        std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
      }
      out << "ok " << done << "\n";
    } else if (mode == "early-exit" || mode == "shutdown-pending") {
      if (!reduce_and_check(out, 0, input, output, count)) return 1;
      if (rank == 0) {
        out << "ok 1\n";
        out.flush();
        if (mode == "shutdown-pending") timed_shutdown(out);
        return 0;  // early-exit: herd's static destructor runs at exit
      }
      last_good = Clock::now();
      if (!reduce_and_check(out, 1, input, output, count)) return 1;
      out << "ok 2\n";
    } else if (mode == "slow-peer") {
      if (rank == 0) std::this_thread::sleep_for(std::chrono::seconds(10));
      const double cpu_start = process_cpu_seconds();
      const Clock::time_point start = Clock::now();
      if (!reduce_and_check(out, 0, input, output, count)) return 1;
      out << "cpu " << process_cpu_seconds() - cpu_start << " wall " << seconds_since(start)
          << "\n";
      out << "ok 1\n";
    } else {
      std::fprintf(stderr, "fault_worker: unknown mode '%s'\n", mode.c_str());
      return 2;
    }
  } catch (const herd::Error& error) {
    out << "error " << seconds_since(last_good) << " " << error.what() << "\n";
    out.flush();
    timed_shutdown(out);
    // After a fatal failure MPI is left unfinalized, and herd refuses to
    // start on it again.
    try {
      herd::init();
      out << "reinit started\n";
    } catch (const herd::Error& refused) {
      out << "reinit " << refused.what() << "\n";
    }
    out.flush();
    return 1;
  }
  out.flush();
  timed_shutdown(out);
  return 0;
}
