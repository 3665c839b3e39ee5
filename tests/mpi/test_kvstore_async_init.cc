// herd::init's refusals of a job with parameter servers, on every rank
// alike (this program does not link herd's KVStore library):
//   too-many  HERD_NUM_SERVERS leaves no worker: the message names the
//             setting and the job's number of ranks;
//   no-loop   a server rank with no server loop to run: the message names
//             the rank and the library to link.
// Each rank prints "rank R: passed" or "rank R: FAILED ..." and exits 0 or 1.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "herd/herd.h"

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const char* rank_text = std::getenv("OMPI_COMM_WORLD_RANK");
  const int rank = rank_text != nullptr ? std::atoi(rank_text) : -1;
  std::string expected;
  if (mode == "too-many") {
    expected =
        "herd::init: HERD_NUM_SERVERS=2 leaves no worker among the job's 2 ranks; at most 1 "
        "of them can be parameter servers";
  } else if (mode == "no-loop") {
    expected =
        "herd::init: on rank 1, rank 1 is a parameter server (HERD_NUM_SERVERS=1), but "
        "this program has no server loop: it does not link herd's KVStore library "
        "(herd::kvstore)";
  } else {
    std::fprintf(stderr, "usage: test_kvstore_async_init too-many|no-loop\n");
    return 2;
  }
  try {
    herd::init();
    std::printf("rank %d: FAILED: herd::init did not throw\n", rank);
    herd::shutdown();
    return 1;
  } catch (const herd::Error& error) {
    const std::string message = error.what();
    if (message.find(expected) == std::string::npos) {
      std::printf("rank %d: FAILED: the message lacks '%s': %s\n", rank, expected.c_str(),
                  message.c_str());
      return 1;
    }
  }
  std::printf("rank %d: passed\n", rank);
  return 0;
}
