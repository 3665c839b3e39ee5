// One rank of the network-fault tests (tests/scripts/network_partition.py,
// tests/scripts/link_down.py).
//
// Usage: partition_worker OUT_DIR ITERATIONS
//
// Reduces a 1 MiB float32 tensor again and again, checking every element of
// every result against its closed form, until ITERATIONS results (0: until
// an allreduce fails). After its first correct result it creates
// OUT_DIR/ready.<rank>, holding its pid, the driver's cue to cut the
// network. It ends by writing OUT_DIR/result.<rank>, whose lines the driver
// reads:
//   ok <iterations>                    every result came, all exact
//   wrong <iteration> <index> <value>  a result differed from the closed form
//   error <seconds> <message>          an allreduce threw; seconds since the
//                                      last correct result
//   shutdown <seconds>                 how long herd::shutdown took after it
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "herd/herd.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: partition_worker OUT_DIR ITERATIONS\n");
    return 2;
  }
  const std::string out_dir = argv[1];
  const long iterations = std::stol(argv[2]);
  herd::init();
  const int rank = herd::rank();
  const int size = herd::size();
  std::ofstream result(out_dir + "/result." + std::to_string(rank));
  constexpr int64_t kCount = 1 << 18;
  std::vector<float> input(kCount);
  std::vector<float> output(kCount);
  Clock::time_point last_good = Clock::now();
  long done = 0;
  bool failed = false;
  for (long i = 0; iterations == 0 || i < iterations; ++i) {
    // Small integers: every sum is exact, whatever the order of additions.
    for (int64_t j = 0; j < kCount; ++j) input[j] = static_cast<float>((j + i + rank) % 64);
    try {
      herd::allreduce("partition/grad",
                      herd::TensorView{input.data(), herd::DataType::kFloat32, {kCount}},
                      herd::TensorView{output.data(), herd::DataType::kFloat32, {kCount}},
                      herd::ReduceOp::kSum);
    } catch (const herd::Error& e) {
      result << "error " << seconds_since(last_good) << " " << e.what() << "\n";
      failed = true;
      break;
    }
    for (int64_t j = 0; j < kCount; ++j) {
      double expected = 0;
      for (int r = 0; r < size; ++r) expected += static_cast<double>((j + i + r) % 64);
      if (output[j] != expected) {
        result << "wrong " << i << " " << j << " " << output[j] << "\n";
        result.flush();
        return 1;
      }
    }
    last_good = Clock::now();
    ++done;
    if (done == 1) {
      // Written whole before it appears: the driver reads it once it exists.
      const std::string ready = out_dir + "/ready." + std::to_string(rank);
      std::ofstream(ready + ".part") << getpid() << "\n";
      std::rename((ready + ".part").c_str(), ready.c_str());
    }
  }
  if (!failed) result << "ok " << done << "\n";
  result.flush();
  const Clock::time_point shutdown_start = Clock::now();
  herd::shutdown();
  result << "shutdown " << seconds_since(shutdown_start) << "\n";
  result.flush();
  return failed ? 1 : 0;
}
