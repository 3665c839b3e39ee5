// main() of every GPU test program: runs the Catch2 session only when a CUDA
// device is visible; otherwise prints why and exits 77, which CTest reports
// as skipped (SKIP_RETURN_CODE), so CI without a GPU stays green and says so.
// Under mpiexec every rank decides alike (each sees the same machine).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "tests/gpu/gpu_test_skip.h"

int main(int argc, char* argv[]) {
  if (herd::testing::visible_devices_or_explain() == 0) return herd::testing::kSkipped;
  return Catch::Session().run(argc, argv);
}
