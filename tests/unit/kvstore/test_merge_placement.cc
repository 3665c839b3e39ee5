// The device types' merge GPUs (kvstore/merge_placement.h): MXNet's rule,
// keys by element count descending onto the GPU with the fewest elements so
// far, against placements worked out by hand.
#include <cstdint>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "kvstore/merge_placement.h"

namespace herd {
namespace kv {
namespace {

using detail::MergePlacement;

TEST_CASE("merge placement: largest keys first, each on the least loaded GPU", "[kvstore]") {
  MergePlacement placement;
  // Init order: key 0 (10 elements), 1 (100), 2 (50), 3 (40), 4 (50).
  placement.add_key(0, 10);
  placement.add_key(1, 100);
  placement.add_key(2, 50);
  placement.add_key(3, 40);
  placement.add_key(4, 50);
  // Placed at the first push, over GPUs 0 and 1, in the order 1 (100),
  // 2 (50), 4 (50: after 2, its elder), 3 (40), 0 (10):
  //   1 -> gpu 0 (0 vs 0: the lower index)      loads 100, 0
  //   2 -> gpu 1                                loads 100, 50
  //   4 -> gpu 1 (50 < 100)                     loads 100, 100
  //   3 -> gpu 0 (100 vs 100: the lower index)  loads 140, 100
  //   0 -> gpu 1                                loads 140, 110
  const std::vector<int> gpus = {0, 1};
  REQUIRE(placement.gpu_of(3, gpus) == 0);
  REQUIRE(placement.gpu_of(0, gpus) == 1);
  REQUIRE(placement.gpu_of(1, gpus) == 0);
  REQUIRE(placement.gpu_of(2, gpus) == 1);
  REQUIRE(placement.gpu_of(4, gpus) == 1);
  REQUIRE(placement.elements_on(0) == 140);
  REQUIRE(placement.elements_on(1) == 110);

  // A key placed keeps its GPU, whatever the GPUs of a later push.
  REQUIRE(placement.gpu_of(1, {1}) == 0);

  // Keys initialised later wait for their first push and continue the
  // loads, over that push's GPUs.
  placement.add_key(7, 5);
  placement.add_key(8, 60);
  const std::vector<int> three = {0, 1, 2};
  REQUIRE(placement.gpu_of(7, three) == 2);  // 8 (60) -> gpu 2 first; 7 (5) -> gpu 2 (60 < 110)
  REQUIRE(placement.gpu_of(8, three) == 2);
  REQUIRE(placement.elements_on(2) == 65);
}

TEST_CASE("merge placement: only the push's GPUs are candidates", "[kvstore]") {
  MergePlacement placement;
  placement.add_key(0, 8);
  placement.add_key(1, 8);
  REQUIRE(placement.gpu_of(0, {2, 3}) == 2);
  REQUIRE(placement.gpu_of(1, {2, 3}) == 3);
  REQUIRE(placement.elements_on(0) == 0);
}

TEST_CASE("merge placement: a key never recorded is refused", "[kvstore]") {
  MergePlacement placement;
  placement.add_key(0, 8);
  REQUIRE_THROWS_AS(placement.gpu_of(0, {}), Error);
  REQUIRE_THROWS_AS(placement.gpu_of(5, {0}), Error);
}

}  // namespace
}  // namespace kv
}  // namespace herd
