// The negotiation message decoders against mutated bytes: 20,000 seeded
// mutants of valid RequestList and ResponseList encodings, each decoded as
// both kinds. A decoder either fails with a Status, leaving its output
// alone, or accepts exactly the bytes that encoding its result gives back
// (the encoding has one form per message), whose sizes are then defined.
// Run under ASan and UBSan by scripts/test.sh, where any overread or
// undefined operation aborts the test.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/message.h"
#include "tests/unit/fuzz/byte_mutator.h"

namespace herd::detail {
namespace {

constexpr uint64_t kSeed = 0x6865726466757a7a;  // "herdfuzz"
constexpr int kMutants = 20000;

Request request(int32_t rank, CollectiveType type, std::string name, std::vector<int64_t> shape) {
  Request r;
  r.rank = rank;
  r.type = type;
  r.name = std::move(name);
  r.shape = std::move(shape);
  return r;
}

// Valid encodings that use every field: each collective, non-default
// dtypes, ops, scales and devices, splits, group shapes and error text.
std::vector<std::vector<uint8_t>> valid_encodings() {
  RequestList requests;
  requests.requests.push_back(request(0, CollectiveType::kAllreduce, "grad/w", {4, 3}));
  Request half = request(1, CollectiveType::kAllreduce, "grad/b", {7});
  half.dtype = DataType::kBFloat16;
  half.op = ReduceOp::kAverage;
  half.prescale = 0.5;
  half.postscale = 0.25;
  requests.requests.push_back(half);
  Request broadcast = request(2, CollectiveType::kBroadcast, "params", {2, 2, 2});
  broadcast.root = 1;
  broadcast.device = Device::gpu(3);
  requests.requests.push_back(broadcast);
  Request alltoall = request(1, CollectiveType::kAlltoall, "rows", {5, 2});
  alltoall.dtype = DataType::kInt64;
  alltoall.splits = {2, 3};
  requests.requests.push_back(alltoall);
  Request grouped = request(0, CollectiveType::kGroupedAllreduce, "group", {});
  grouped.group_shapes = {{3}, {}, {2, 5}};
  requests.requests.push_back(grouped);
  requests.requests.push_back(request(3, CollectiveType::kBarrier, "", {}));

  ResponseList responses;
  Response allreduce;
  allreduce.name = "grad/w";
  allreduce.shape = {4, 3};
  responses.responses.push_back(allreduce);
  Response allgather;
  allgather.collective = CollectiveType::kAllgather;
  allgather.name = "gathered";
  allgather.dtype = DataType::kUInt8;
  allgather.shape = {2, 8};
  allgather.rank_extents = {2, 5, 1};
  responses.responses.push_back(allgather);
  Response grouped_response;
  grouped_response.collective = CollectiveType::kGroupedAllreduce;
  grouped_response.name = "group";
  grouped_response.group_shapes = {{3}, {2, 5}};
  responses.responses.push_back(grouped_response);
  Response error;
  error.type = ResponseType::kError;
  error.collective = CollectiveType::kReducescatter;
  error.name = "mismatch";
  error.error_message = "ranks 0 and 1 disagree on the shape";
  responses.responses.push_back(error);

  RequestList one_request;
  one_request.requests.push_back(requests.requests[0]);
  ResponseList one_response;
  one_response.responses.push_back(error);
  return {encode(requests),     encode(responses),     encode(one_request),
          encode(one_response), encode(RequestList{}), encode(ResponseList{})};
}

// A list that a failed decode must leave as it is.
RequestList sentinel(RequestList*) {
  RequestList list;
  list.requests.push_back(request(9, CollectiveType::kBarrier, "unchanged", {1}));
  return list;
}
ResponseList sentinel(ResponseList*) {
  ResponseList list;
  Response r;
  r.name = "unchanged";
  list.responses.push_back(r);
  return list;
}
const std::vector<Request>& entries(const RequestList& list) { return list.requests; }
const std::vector<Response>& entries(const ResponseList& list) { return list.responses; }
CollectiveType collective_of(const Request& r) { return r.type; }
CollectiveType collective_of(const Response& r) { return r.collective; }

// Decodes `bytes` as a List and checks the outcome; returns whether the
// decoder accepted them.
template <typename List>
bool check_decode(const std::vector<uint8_t>& bytes) {
  List list = sentinel(static_cast<List*>(nullptr));
  const Status status = decode(bytes.data(), bytes.size(), &list);
  if (!status.is_ok()) {
    CHECK_FALSE(status.message().empty());
    REQUIRE(entries(list).size() == 1);
    CHECK(entries(list)[0].name == "unchanged");
    return false;
  }
  CHECK(encode(list) == bytes);
  for (const auto& entry : entries(list)) {
    // Defined for whatever decodes: at most INT64_MAX bytes.
    const int64_t elements = entry.count_elements(collective_of(entry));
    CHECK(elements >= 0);
    CHECK(elements <=
          std::numeric_limits<int64_t>::max() / static_cast<int64_t>(element_size(entry.dtype)));
  }
  return true;
}

}  // namespace

TEST_CASE("message fuzz: mutated encodings are decoded or refused, never misread",
          "[message][fuzz]") {
  const std::vector<std::vector<uint8_t>> valid = valid_encodings();
  for (const auto& bytes : valid) {
    REQUIRE(check_decode<RequestList>(bytes) != check_decode<ResponseList>(bytes));
  }
  testing::ByteMutator mutator(kSeed);
  int accepted = 0;
  for (int i = 0; i < kMutants; ++i) {
    const std::vector<uint8_t> mutant = mutator.mutate(valid[mutator.below(valid.size())]);
    INFO("seed " << kSeed << ", mutant " << i << " of " << mutant.size() << " bytes");
    accepted += check_decode<RequestList>(mutant) ? 1 : 0;
    accepted += check_decode<ResponseList>(mutant) ? 1 : 0;
  }
  // Most mutants are refused; a few (an edited scale, name byte or extent)
  // are valid messages. Both outcomes must have been exercised.
  CHECK(accepted > 0);
  CHECK(accepted < kMutants);
}

TEST_CASE("message fuzz: a tensor larger than int64 bytes is refused, naming it",
          "[message][fuzz]") {
  RequestList requests;
  Request huge = request(0, CollectiveType::kAllreduce, "huge", {int64_t{1} << 40, 1 << 22});
  requests.requests.push_back(huge);
  std::vector<uint8_t> bytes = encode(requests);
  RequestList decoded_requests;
  Status status = decode(bytes.data(), bytes.size(), &decoded_requests);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "corrupt RequestList at byte 6: allreduce 'huge' is larger than 9223372036854775807 bytes");

  // 2^61 float32 elements fit in int64_t, their 2^63 bytes do not.
  huge.shape = {int64_t{1} << 61};
  requests.requests = {huge};
  bytes = encode(requests);
  status = decode(bytes.data(), bytes.size(), &decoded_requests);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "corrupt RequestList at byte 6: allreduce 'huge' is larger than 9223372036854775807 bytes");
  huge.dtype = DataType::kUInt8;
  requests.requests = {huge};
  bytes = encode(requests);
  REQUIRE(decode(bytes.data(), bytes.size(), &decoded_requests).is_ok());
  CHECK(decoded_requests.requests[0].num_elements() == int64_t{1} << 61);

  // A grouped allreduce: members that fit one by one, but not together.
  ResponseList responses;
  Response grouped;
  grouped.collective = CollectiveType::kGroupedAllreduce;
  grouped.name = "group";
  grouped.dtype = DataType::kUInt8;
  grouped.group_shapes = {{int64_t{1} << 62}, {int64_t{1} << 62}};
  responses.responses.push_back(grouped);
  bytes = encode(responses);
  ResponseList decoded_responses;
  status = decode(bytes.data(), bytes.size(), &decoded_responses);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "corrupt ResponseList at byte 6: grouped allreduce 'group' is larger than "
        "9223372036854775807 bytes");
}

}  // namespace herd::detail
