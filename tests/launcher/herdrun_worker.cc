// One rank of herdrun's launch tests (test_herdrun.py starts it through
// herdrun and reads what every rank prints).
//
// Usage: herdrun_worker MODE [ARG]
//
// Every rank calls herd::init, then prints to stdout
//   rank <r> of <n> restart <HERD_RESTART_COUNT> <NAME>=<value> ...
// for the HERD_* variables listed in HERDRUN_WORKER_SHOW (comma-separated),
// and then, by MODE:
//   ok            allreduces its rank + 1 over every rank and prints
//                 "rank <r> sum <s>" (the exact sum is n(n+1)/2)
//   throw         rank 1 throws a std::runtime_error nobody catches; the
//                 others wait in an allreduce
//   kill          rank 1 writes one line to stderr and sends itself SIGKILL
//   fail-until K  while HERD_RESTART_COUNT < K rank 1 writes an error line and
//                 exits with status 3; from the K-th restart on, as ok
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include <unistd.h>

#include "herd/herd.h"

namespace {

std::string environment(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "(unset)";
}

void allreduce_rank_sum() {
  float input = static_cast<float>(herd::rank() + 1);
  float output = 0;
  herd::allreduce("herdrun/sum", herd::TensorView{&input, herd::DataType::kFloat32, {1}},
                  herd::TensorView{&output, herd::DataType::kFloat32, {1}}, herd::ReduceOp::kSum);
  std::printf("rank %d sum %g\n", herd::rank(), static_cast<double>(output));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: herdrun_worker ok|throw|kill|fail-until K\n");
    return 2;
  }
  const std::string mode = argv[1];
  herd::init();
  const int rank = herd::rank();
  const int restart = std::atoi(environment("HERD_RESTART_COUNT").c_str());

  std::ostringstream line;
  line << "rank " << rank << " of " << herd::size() << " restart "
       << environment("HERD_RESTART_COUNT");
  std::istringstream shown(environment("HERDRUN_WORKER_SHOW"));
  for (std::string name; std::getline(shown, name, ',');) {
    if (!name.empty() && name != "(unset)") line << " " << name << "=" << environment(name.c_str());
  }
  std::printf("%s\n", line.str().c_str());
  std::fflush(stdout);

  if (mode == "throw" && rank == 1) {
    throw std::runtime_error("herdrun_worker rank 1: a deliberate failure");
  }
  if (mode == "kill" && rank == 1) {
    std::fprintf(stderr, "herdrun_worker rank 1: sending itself SIGKILL\n");
    std::fflush(stderr);
    std::raise(SIGKILL);
  }
  if (mode == "fail-until" && rank == 1 && argc > 2 && restart < std::atoi(argv[2])) {
    std::fprintf(stderr, "herdrun_worker rank 1: error on launch %d\n", restart);
    std::fflush(stderr);
    std::_Exit(3);
  }
  allreduce_rank_sum();
  herd::shutdown();
  return 0;
}
