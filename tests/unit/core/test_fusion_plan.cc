// plan_fusion: thresholds, exact fits, overflow, oversize tensors, unlike
// responses interleaved, skipped errors, and determinism.
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "src/fusion_plan.h"

namespace herd::detail {
namespace {

// A float32 allreduce of `bytes` bytes (a multiple of 4).
Response of_bytes(int64_t bytes) {
  Response r;
  r.name = "t";
  r.dtype = DataType::kFloat32;
  r.shape = {bytes / 4};
  return r;
}

Response error_response() {
  Response r = of_bytes(4);
  r.type = ResponseType::kError;
  r.error_message = "mismatch";
  return r;
}

using Members = std::vector<std::vector<std::size_t>>;

Members members_of(const std::vector<FusionGroup>& groups) {
  Members members;
  for (const FusionGroup& g : groups) members.push_back(g.members);
  return members;
}

std::vector<std::size_t> totals_of(const std::vector<FusionGroup>& groups) {
  std::vector<std::size_t> totals;
  for (const FusionGroup& g : groups) totals.push_back(g.total_bytes);
  return totals;
}

}  // namespace

TEST_CASE("plan_fusion: nothing to plan", "[fusion]") {
  CHECK(plan_fusion({}, 1024).empty());
  CHECK(plan_fusion({error_response(), error_response()}, 1024).empty());
}

TEST_CASE("plan_fusion: threshold 0 gives one group per response", "[fusion]") {
  std::vector<Response> responses = {of_bytes(8), of_bytes(0), of_bytes(4)};
  std::vector<FusionGroup> groups = plan_fusion(responses, 0);
  CHECK(members_of(groups) == Members{{0}, {1}, {2}});
  CHECK(totals_of(groups) == std::vector<std::size_t>{8, 0, 4});
  CHECK(members_of(plan_fusion(responses, -1)) == Members{{0}, {1}, {2}});
}

TEST_CASE("plan_fusion: an exact fit stays in one group", "[fusion]") {
  std::vector<Response> responses = {of_bytes(40), of_bytes(40), of_bytes(20)};
  std::vector<FusionGroup> groups = plan_fusion(responses, 100);
  CHECK(members_of(groups) == Members{{0, 1, 2}});
  CHECK(totals_of(groups) == std::vector<std::size_t>{100});
}

TEST_CASE("plan_fusion: overflow starts a new group", "[fusion]") {
  std::vector<Response> responses = {of_bytes(40), of_bytes(40), of_bytes(24), of_bytes(8),
                                     of_bytes(100)};
  std::vector<FusionGroup> groups = plan_fusion(responses, 100);
  // 40+40+24 > 100: the third opens a new group; the 8 joins it; 100 won't fit.
  CHECK(members_of(groups) == Members{{0, 1}, {2, 3}, {4}});
  CHECK(totals_of(groups) == std::vector<std::size_t>{80, 32, 100});
}

TEST_CASE("plan_fusion: a tensor above the threshold is alone", "[fusion]") {
  std::vector<Response> responses = {of_bytes(16), of_bytes(400), of_bytes(16)};
  std::vector<FusionGroup> groups = plan_fusion(responses, 64);
  // The oversize tensor does not close the open group around it.
  CHECK(members_of(groups) == Members{{0, 2}, {1}});
  CHECK(totals_of(groups) == std::vector<std::size_t>{32, 400});
}

TEST_CASE("plan_fusion: a tensor above the largest fused one is alone", "[fusion]") {
  std::vector<Response> responses = {of_bytes(16), of_bytes(40), of_bytes(44), of_bytes(16)};
  // Limit 40: the 40-byte tensor still fuses, the 44-byte one runs on its own
  // although the buffer (1000 bytes) has room for it.
  std::vector<FusionGroup> groups = plan_fusion(responses, 1000, 40);
  CHECK(members_of(groups) == Members{{0, 1, 3}, {2}});
  CHECK(totals_of(groups) == std::vector<std::size_t>{72, 44});
  // 0: no limit beyond the threshold.
  CHECK(members_of(plan_fusion(responses, 1000, 0)) == Members{{0, 1, 2, 3}});
}

TEST_CASE("plan_fusion: unlike responses interleave without breaking groups", "[fusion]") {
  std::vector<Response> responses;
  for (int i = 0; i < 6; ++i) {
    Response r = of_bytes(8);
    if (i % 2 == 1) r.dtype = DataType::kFloat64;
    responses.push_back(r);
  }
  Response on_gpu = of_bytes(8);
  on_gpu.device = Device::gpu(0);
  responses.push_back(on_gpu);
  Response averaged = of_bytes(8);
  averaged.op = ReduceOp::kAverage;
  responses.push_back(averaged);
  Response prescaled = of_bytes(8);
  prescaled.prescale = 0.5;
  responses.push_back(prescaled);
  Response postscaled = of_bytes(8);
  postscaled.postscale = 0.5;
  responses.push_back(postscaled);
  responses.push_back(of_bytes(8));

  std::vector<FusionGroup> groups = plan_fusion(responses, 1024);
  CHECK(members_of(groups) == Members{{0, 2, 4, 10}, {1, 3, 5}, {6}, {7}, {8}, {9}});
  // The float64 group counts its own bytes: shape {2} of 8-byte elements.
  CHECK(groups[1].total_bytes == 3 * 16);
}

TEST_CASE("plan_fusion: groups come in the order of their first member", "[fusion]") {
  Response a = of_bytes(60);
  Response b = of_bytes(8);
  b.dtype = DataType::kInt32;
  // a(60) b(8) a(60: new a-group) b(8) a(32: joins the second a-group)
  std::vector<Response> responses = {a, b, a, b, of_bytes(32)};
  std::vector<FusionGroup> groups = plan_fusion(responses, 100);
  CHECK(members_of(groups) == Members{{0}, {1, 3}, {2, 4}});
}

TEST_CASE("plan_fusion: errors are skipped", "[fusion]") {
  std::vector<Response> responses = {of_bytes(8), error_response(), of_bytes(8), error_response()};
  std::vector<FusionGroup> groups = plan_fusion(responses, 1024);
  CHECK(members_of(groups) == Members{{0, 2}});
  CHECK(totals_of(groups) == std::vector<std::size_t>{16});
}

TEST_CASE("plan_fusion: every execute response lands in exactly one group", "[fusion]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<Response> responses;
  for (int i = 0; i < 500; ++i) {
    Response r = of_bytes(4 * pick(rng));
    if (pick(rng) < 30) r.dtype = DataType::kFloat16;
    if (pick(rng) < 10) r.device = Device::gpu(pick(rng) % 2);
    if (pick(rng) < 5) r.type = ResponseType::kError;
    responses.push_back(r);
  }
  for (int64_t threshold : {int64_t{0}, int64_t{64}, int64_t{400}, int64_t{1} << 30}) {
    INFO("threshold " << threshold);
    std::vector<FusionGroup> groups = plan_fusion(responses, threshold);
    // Same input, same plan: what keeps every rank's fusion buffers aligned.
    CHECK(members_of(plan_fusion(responses, threshold)) == members_of(groups));

    std::vector<int> seen(responses.size(), 0);
    std::size_t previous_first = 0;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const FusionGroup& group = groups[g];
      REQUIRE_FALSE(group.members.empty());
      if (g > 0) CHECK(group.members.front() > previous_first);
      previous_first = group.members.front();
      std::size_t total = 0;
      for (std::size_t k = 0; k < group.members.size(); ++k) {
        const Response& r = responses[group.members[k]];
        ++seen[group.members[k]];
        total += r.num_bytes();
        if (k > 0) CHECK(group.members[k] > group.members[k - 1]);
        const Response& first = responses[group.members.front()];
        CHECK(r.dtype == first.dtype);
        CHECK(r.device == first.device);
      }
      CHECK(group.total_bytes == total);
      if (group.members.size() > 1) CHECK(static_cast<int64_t>(total) <= threshold);
    }
    for (std::size_t i = 0; i < responses.size(); ++i) {
      INFO("response " << i);
      CHECK(seen[i] == (responses[i].type == ResponseType::kError ? 0 : 1));
    }
  }
}

}  // namespace herd::detail
