// Negotiation of the collectives beyond allreduce: the wire fields they add
// (root, splits, group_shapes; rank_extents), what build_response compares
// for each collective and in which order, how Response::matches lets the
// response cache hit or miss when one rank's first dimension or splits
// change, and messages that name a process set's members by global rank.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/coordinator.h"
#include "src/message.h"
#include "src/response_cache.h"

namespace herd::detail {
namespace {

using Shape = std::vector<int64_t>;

const std::vector<CollectiveType> kCollectives = {
    CollectiveType::kAllreduce,       CollectiveType::kAllgather,     CollectiveType::kBroadcast,
    CollectiveType::kAlltoall,        CollectiveType::kReducescatter, CollectiveType::kBarrier,
    CollectiveType::kGroupedAllreduce};

Request request(int rank, CollectiveType type, const std::string& name, Shape shape = {4, 3}) {
  Request r;
  r.rank = rank;
  r.type = type;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

// One request per rank, rank r with first dimension extents[r] and trailing
// dims [3].
std::vector<Request> gather_requests(const std::string& name, const Shape& extents) {
  std::vector<Request> requests;
  for (std::size_t r = 0; r < extents.size(); ++r) {
    requests.push_back(
        request(static_cast<int>(r), CollectiveType::kAllgather, name, {extents[r], 3}));
  }
  return requests;
}

// One alltoall request per rank: rank r sends splits[r] (p entries) rows of
// [*, 2], so its first dimension is the sum of its row.
std::vector<Request> alltoall_requests(const std::string& name, const std::vector<Shape>& splits) {
  std::vector<Request> requests;
  for (std::size_t r = 0; r < splits.size(); ++r) {
    int64_t rows = 0;
    for (int64_t s : splits[r]) rows += s;
    Request q = request(static_cast<int>(r), CollectiveType::kAlltoall, name, {rows, 2});
    q.splits = splits[r];
    requests.push_back(q);
  }
  return requests;
}

}  // namespace

// --- wire round trips ---------------------------------------------------------

TEST_CASE("negotiation: requests of every collective round trip with their fields",
          "[negotiation]") {
  RequestList sent;
  int i = 0;
  for (CollectiveType type : kCollectives) {
    for (int variant = 0; variant < 3; ++variant, ++i) {
      Request r = request(i % 4, type, std::string(to_string(type)) + "/" + std::to_string(i),
                          variant == 0 ? Shape{} : Shape{variant * 5, 3});
      r.root = variant == 2 ? 1 << 30 : variant;
      if (variant > 0) r.splits = {0, 7, static_cast<int64_t>(1) << 40, 3};
      if (variant == 2) r.group_shapes = {{}, {0}, {4, 5}, {1, 1, 1}};
      if (variant == 1) r.group_shapes = {{3}};
      r.op = ReduceOp::kProduct;
      r.prescale = 0.25;
      sent.requests.push_back(r);
    }
  }
  const std::vector<uint8_t> bytes = encode(sent);
  RequestList received;
  REQUIRE(decode(bytes.data(), bytes.size(), &received).is_ok());
  REQUIRE(received.requests.size() == sent.requests.size());
  for (std::size_t k = 0; k < sent.requests.size(); ++k) {
    INFO("request " << k << " '" << sent.requests[k].name << "'");
    const Request& a = sent.requests[k];
    const Request& b = received.requests[k];
    CHECK(b.rank == a.rank);
    CHECK(b.type == a.type);
    CHECK(b.name == a.name);
    CHECK(b.op == a.op);
    CHECK(b.prescale == a.prescale);
    CHECK(b.shape == a.shape);
    CHECK(b.root == a.root);
    CHECK(b.splits == a.splits);
    CHECK(b.group_shapes == a.group_shapes);
    CHECK(b.same_signature(a));
  }
}

TEST_CASE("negotiation: responses of every collective round trip with their fields",
          "[negotiation]") {
  ResponseList sent;
  int i = 0;
  for (CollectiveType type : kCollectives) {
    for (int variant = 0; variant < 3; ++variant, ++i) {
      Response r;
      r.type = variant == 2 ? ResponseType::kError : ResponseType::kExecute;
      r.collective = type;
      r.name = std::string(to_string(type)) + "#" + std::to_string(i);
      r.shape = variant == 0 ? Shape{} : Shape{2, variant};
      r.root = 3 * variant;
      if (variant == 1) r.rank_extents = {2, 0, 5};
      if (variant == 2) r.rank_extents = Shape(16, 1);  // a 4 x 4 splits matrix
      if (variant > 0) r.group_shapes = {{3}, {4, 5}, {}};
      if (r.type == ResponseType::kError) r.error_message = "root mismatch: rank 1 0, rank 3 1";
      sent.responses.push_back(r);
    }
  }
  const std::vector<uint8_t> bytes = encode(sent);
  ResponseList received;
  REQUIRE(decode(bytes.data(), bytes.size(), &received).is_ok());
  REQUIRE(received.responses.size() == sent.responses.size());
  for (std::size_t k = 0; k < sent.responses.size(); ++k) {
    INFO("response " << k << " '" << sent.responses[k].name << "'");
    const Response& a = sent.responses[k];
    const Response& b = received.responses[k];
    CHECK(b.type == a.type);
    CHECK(b.collective == a.collective);
    CHECK(b.name == a.name);
    CHECK(b.shape == a.shape);
    CHECK(b.root == a.root);
    CHECK(b.rank_extents == a.rank_extents);
    CHECK(b.group_shapes == a.group_shapes);
    CHECK(b.error_message == a.error_message);
  }
}

TEST_CASE("negotiation: every truncation of the new fields fails cleanly", "[negotiation]") {
  RequestList requests;
  Request q = request(1, CollectiveType::kAlltoall, "a2a", {5, 2});
  q.splits = {2, 3};
  q.group_shapes = {{1, 2}};
  requests.requests.push_back(q);
  std::vector<uint8_t> bytes = encode(requests);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    RequestList out;
    CHECK_FALSE(decode(bytes.data(), n, &out).is_ok());
  }
  ResponseList responses;
  Response r;
  r.collective = CollectiveType::kAlltoall;
  r.name = "a2a";
  r.rank_extents = {2, 3, 1, 4};
  r.group_shapes = {{7}};
  responses.responses.push_back(r);
  bytes = encode(responses);
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    ResponseList out;
    CHECK_FALSE(decode(bytes.data(), n, &out).is_ok());
  }
}

// --- build_response, collective by collective ----------------------------------

TEST_CASE("negotiation: allgather lets first dimensions differ", "[negotiation]") {
  std::vector<Request> requests = gather_requests("g", {2, 5, 0});
  // Fields allgather does not use may differ.
  requests[1].op = ReduceOp::kMax;
  requests[2].prescale = 3.0;
  requests[2].root = 2;
  const Response response = build_response(requests);
  REQUIRE(response.type == ResponseType::kExecute);
  CHECK(response.collective == CollectiveType::kAllgather);
  CHECK(response.shape == Shape{2, 3});  // rank 0's
  CHECK(response.rank_extents == Shape{2, 5, 0});
  CHECK(response.error_message.empty());
}

TEST_CASE("negotiation: allgather trailing dims, ndims and dtype must agree", "[negotiation]") {
  std::vector<Request> two = gather_requests("gather/x", {2, 2});
  two[1].shape = {2, 4};
  Response response = build_response(two);
  CHECK(response.type == ResponseType::kError);
  CHECK(response.rank_extents.empty());
  CHECK(response.error_message ==
        "allgather 'gather/x': shape mismatch beyond the first dimension: rank 0 [2,3], "
        "rank 1 [2,4]");

  std::vector<Request> three = gather_requests("g3", {1, 2, 3});
  three[2].shape = {3, 3, 1};
  three[1].dtype = DataType::kInt32;
  CHECK(build_response(three).error_message ==
        "allgather 'g3': dtype mismatch: rank 0 float32, rank 1 int32, rank 2 float32; "
        "shape mismatch beyond the first dimension: rank 0 [1,3], rank 1 [2,3], rank 2 [3,3,1]");

  // A scalar against a vector differs in the number of dimensions.
  std::vector<Request> scalar = gather_requests("s", {4, 4});
  scalar[0].shape = {};
  CHECK(build_response(scalar).error_message ==
        "allgather 's': shape mismatch beyond the first dimension: rank 0 [], rank 1 [4,3]");

  std::vector<Request> device = gather_requests("d", {1, 1});
  device[1].device = Device::gpu(0);
  CHECK(build_response(device).error_message ==
        "allgather 'd': device mismatch: rank 0 cpu, "
        "rank 1 gpu");
}

TEST_CASE("negotiation: an allgather or alltoall output beyond int64 bytes fails every rank",
          "[negotiation]") {
  // Rows of one float32: 2 * 2^60 rows of 4 bytes are 2^63 bytes, one past
  // the limit, though each rank's 2^62 bytes fit.
  const int64_t half = int64_t{1} << 60;
  std::vector<Request> gather = gather_requests("huge", {half, half});
  for (Request& r : gather) r.shape[1] = 1;
  Response response = build_response(gather);
  CHECK(response.type == ResponseType::kError);
  CHECK(response.rank_extents.empty());
  CHECK(response.error_message ==
        "allgather 'huge': the output's first dimension, the sum of rank 0 1152921504606846976, "
        "rank 1 1152921504606846976, times 4 bytes per row exceeds 2^63-1 bytes");
  // One row fewer fits: 2^63 - 4 bytes.
  gather[1].shape[0] = half - 1;
  CHECK(build_response(gather).type == ResponseType::kExecute);
  // The row count itself wrapping around int64.
  std::vector<Request> wraps = gather_requests("wraps", {INT64_MAX, 1});
  for (Request& r : wraps) r.shape[1] = 0;
  CHECK(build_response(wraps).type == ResponseType::kExecute);  // rows of no bytes: nothing
  for (Request& r : wraps) r.shape[1] = 1;
  CHECK(build_response(wraps).type == ResponseType::kError);

  // alltoall: what rank 1 receives from both ranks, rows of [*, 2] float32.
  const int64_t quarter = int64_t{1} << 59;
  std::vector<Request> exchange = alltoall_requests("a2a", {{0, quarter}, {0, quarter}});
  CHECK(build_response(exchange).error_message ==
        "alltoall 'a2a': the rows rank 1 receives, the sum of rank 0 576460752303423488, "
        "rank 1 576460752303423488, times 8 bytes per row exceeds 2^63-1 bytes");
  exchange = alltoall_requests("a2a", {{quarter, 0}, {0, quarter}});
  CHECK(build_response(exchange).type == ResponseType::kExecute);
}

TEST_CASE("negotiation: alltoall gives the splits matrix, sender-major", "[negotiation]") {
  const std::vector<Shape> splits = {{1, 0, 2}, {3, 3, 0}, {0, 4, 1}};
  std::vector<Request> requests = alltoall_requests("a2a", splits);
  const Response response = build_response(requests);
  REQUIRE(response.type == ResponseType::kExecute);
  CHECK(response.collective == CollectiveType::kAlltoall);
  CHECK(response.shape == Shape{3, 2});
  CHECK(response.rank_extents == Shape{1, 0, 2, 3, 3, 0, 0, 4, 1});
  for (const Request& r : requests) {
    INFO("rank " << r.rank);
    CHECK(response.matches(r));
  }

  requests[2].shape = {5, 3};
  const Response bad = build_response(requests);
  CHECK(bad.type == ResponseType::kError);
  CHECK(bad.rank_extents.empty());
  CHECK(bad.error_message ==
        "alltoall 'a2a': shape mismatch beyond the first dimension: rank 0 [3,2], rank 1 [6,2], "
        "rank 2 [5,3]");
}

TEST_CASE("negotiation: broadcast compares dtype, shape, root and device, in that order",
          "[negotiation]") {
  std::vector<Request> requests;
  for (int rank = 0; rank < 3; ++rank) {
    Request r = request(rank, CollectiveType::kBroadcast, "bcast/x", {5});
    r.root = 2;
    r.op = rank == 1 ? ReduceOp::kMin : ReduceOp::kSum;  // unused: not compared
    r.postscale = rank + 1.0;
    requests.push_back(r);
  }
  Response response = build_response(requests);
  REQUIRE(response.type == ResponseType::kExecute);
  CHECK(response.root == 2);
  CHECK(response.rank_extents.empty());
  CHECK(response.matches(requests[0]));
  Request moved_root = requests[0];
  moved_root.root = 0;
  CHECK_FALSE(response.matches(moved_root));  // the cache misses

  requests[1].root = 0;
  CHECK(build_response(requests).error_message ==
        "broadcast 'bcast/x': root mismatch: rank 0 2, rank 1 0, rank 2 2");
  requests[2].shape = {6};
  requests[0].device = Device::gpu(3);
  requests[1].dtype = DataType::kUInt8;
  CHECK(build_response(requests).error_message ==
        "broadcast 'bcast/x': dtype mismatch: rank 0 float32, rank 1 uint8, rank 2 float32; "
        "shape mismatch: rank 0 [5], rank 1 [5], rank 2 [6]; "
        "root mismatch: rank 0 2, rank 1 0, rank 2 2; "
        "device mismatch: rank 0 gpu, rank 1 cpu, rank 2 cpu");
}

TEST_CASE("negotiation: reducescatter compares like allreduce", "[negotiation]") {
  std::vector<Request> requests;
  for (int rank = 0; rank < 2; ++rank) {
    requests.push_back(request(rank, CollectiveType::kReducescatter, "rs/x", {4, 3}));
  }
  requests[0].root = 1;  // unused: not compared
  Response ok = build_response(requests);
  REQUIRE(ok.type == ResponseType::kExecute);
  CHECK(ok.collective == CollectiveType::kReducescatter);
  CHECK(ok.shape == Shape{4, 3});

  requests[1].shape = {4, 2};
  CHECK(build_response(requests).error_message ==
        "reducescatter 'rs/x': shape mismatch: rank 0 [4,3], rank 1 [4,2]");
  requests[1].op = ReduceOp::kMax;
  requests[0].prescale = 0.5;
  requests[1].postscale = 4.0;
  CHECK(build_response(requests).error_message ==
        "reducescatter 'rs/x': op mismatch: rank 0 sum, rank 1 max; "
        "shape mismatch: rank 0 [4,3], rank 1 [4,2]; "
        "prescale mismatch: rank 0 0.5, rank 1 1; "
        "postscale mismatch: rank 0 1, rank 1 4");
}

TEST_CASE("negotiation: grouped allreduce compares every member's shape", "[negotiation]") {
  const std::string name = "{a, b}";
  std::vector<Request> requests;
  for (int rank = 0; rank < 3; ++rank) {
    Request r = request(rank, CollectiveType::kGroupedAllreduce, name, {});
    r.group_shapes = {{3}, {4, 5}};
    requests.push_back(r);
  }
  Response ok = build_response(requests);
  REQUIRE(ok.type == ResponseType::kExecute);
  CHECK(ok.group_shapes == std::vector<Shape>{{3}, {4, 5}});
  CHECK(ok.num_elements() == 23);
  CHECK(ok.matches(requests[1]));
  Request regrouped = requests[1];
  regrouped.group_shapes = {{3}, {5, 4}};
  CHECK_FALSE(ok.matches(regrouped));  // the cache misses

  requests[1].group_shapes = {{3}, {4, 6}};
  CHECK(build_response(requests).error_message ==
        "grouped allreduce '{a, b}': shapes mismatch: rank 0 {[3], [4,5]}, "
        "rank 1 {[3], [4,6]}, rank 2 {[3], [4,5]}");
  requests[2].group_shapes = {{3}};  // one member fewer
  requests[2].op = ReduceOp::kAverage;
  CHECK(build_response(requests).error_message ==
        "grouped allreduce '{a, b}': op mismatch: rank 0 sum, rank 1 sum, rank 2 average; "
        "shapes mismatch: rank 0 {[3], [4,5]}, rank 1 {[3], [4,6]}, rank 2 {[3]}");
}

TEST_CASE("negotiation: barrier executes whatever unused fields differ", "[negotiation]") {
  std::vector<Request> requests;
  for (int rank = 0; rank < 4; ++rank) {
    Request r = request(rank, CollectiveType::kBarrier, "herd.barrier.7", {});
    r.op = static_cast<ReduceOp>(rank);
    r.prescale = rank + 2.0;
    r.root = rank;
    requests.push_back(r);
  }
  const Response response = build_response(requests);
  CHECK(response.type == ResponseType::kExecute);
  CHECK(response.collective == CollectiveType::kBarrier);
  CHECK(response.name == "herd.barrier.7");
  CHECK(build_response({requests[2]}).type == ResponseType::kExecute);
}

TEST_CASE("negotiation: a collective mismatch is reported alone", "[negotiation]") {
  std::vector<Request> requests = {request(0, CollectiveType::kAllreduce, "mixed", {2, 3}),
                                   request(1, CollectiveType::kAllgather, "mixed", {7}),
                                   request(2, CollectiveType::kAllreduce, "mixed", {2, 3})};
  requests[1].dtype = DataType::kInt64;
  requests[2].op = ReduceOp::kMin;
  Response response = build_response(requests);
  CHECK(response.type == ResponseType::kError);
  CHECK(response.error_message ==
        "allreduce 'mixed': collective mismatch: rank 0 allreduce, rank 1 allgather, "
        "rank 2 allreduce");

  // Named as rank 0 submitted it.
  std::vector<Request> other = {request(0, CollectiveType::kReducescatter, "m2"),
                                request(1, CollectiveType::kAlltoall, "m2")};
  CHECK(build_response(other).error_message ==
        "reducescatter 'm2': collective mismatch: rank 0 reducescatter, rank 1 alltoall");
  other[0].type = CollectiveType::kGroupedAllreduce;
  other[1].type = CollectiveType::kBarrier;
  CHECK(build_response(other).error_message ==
        "grouped allreduce 'm2': collective mismatch: rank 0 grouped allreduce, rank 1 barrier");
}

// --- global ranks in a process set ----------------------------------------------

TEST_CASE("negotiation: rank labels name a process set's members by global rank", "[negotiation]") {
  const std::vector<int> odd = {1, 3};
  CHECK(build_response({request(0, CollectiveType::kAllreduce, "mm", {2}),
                        request(1, CollectiveType::kAllreduce, "mm", {3})},
                       odd)
            .error_message == "allreduce 'mm': shape mismatch: rank 1 [2], rank 3 [3]");

  std::vector<Request> gather = gather_requests("g", {1, 1, 1});
  gather[1].shape = {1, 4};
  CHECK(build_response(gather, {0, 2, 5}).error_message ==
        "allgather 'g': shape mismatch beyond the first dimension: rank 0 [1,3], rank 2 [1,4], "
        "rank 5 [1,3]");

  std::vector<Request> mixed = {request(0, CollectiveType::kBroadcast, "x"),
                                request(1, CollectiveType::kAllreduce, "x")};
  CHECK(build_response(mixed, {2, 3}).error_message ==
        "broadcast 'x': collective mismatch: rank 2 broadcast, rank 3 allreduce");

  // The labels change messages only: an agreement is the same response.
  const Response agreed = build_response(gather_requests("g", {2, 1}), odd);
  CHECK(agreed.type == ResponseType::kExecute);
  CHECK(agreed.rank_extents == Shape{2, 1});
}

TEST_CASE("negotiation: a Coordinator with rank labels names global ranks", "[negotiation]") {
  Coordinator pair(2, {1, 3});
  REQUIRE(pair.add(request(1, CollectiveType::kAllreduce, "mm", {3})).is_ok());
  REQUIRE(pair.add(request(0, CollectiveType::kAllreduce, "mm", {2})).is_ok());
  std::vector<Response> ready = pair.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].error_message == "allreduce 'mm': shape mismatch: rank 1 [2], rank 3 [3]");
}

// --- Response::matches and the response cache -------------------------------------

TEST_CASE("negotiation: allgather matches on this rank's own first dimension", "[negotiation]") {
  std::vector<Request> requests = gather_requests("g", {2, 5, 0});
  const Response response = build_response(requests);
  for (const Request& r : requests) {
    INFO("rank " << r.rank);
    CHECK(response.matches(r));
  }
  Request changed = requests[1];
  changed.shape = {2, 3};  // rank 0's first dim, but not rank 1's
  CHECK_FALSE(response.matches(changed));
  Request trailing = requests[0];
  trailing.shape = {2, 4};
  CHECK_FALSE(response.matches(trailing));
  Request deeper = requests[2];
  deeper.shape = {0, 3, 1};
  CHECK_FALSE(response.matches(deeper));
  Request stranger = requests[0];
  stranger.rank = 3;  // no such rank in the response
  CHECK_FALSE(response.matches(stranger));
  Request scalar = requests[0];
  scalar.shape = {};
  CHECK_FALSE(response.matches(scalar));
}

TEST_CASE("negotiation: alltoall matches on this rank's row of splits", "[negotiation]") {
  const std::vector<Shape> splits = {{1, 1}, {2, 0}};
  std::vector<Request> requests = alltoall_requests("a2a", splits);
  const Response response = build_response(requests);
  Request moved = requests[0];
  moved.splits = {2, 0};  // rank 1's row, same first dimension
  CHECK_FALSE(response.matches(moved));
  Request longer = requests[1];
  longer.splits = {2, 0, 0};
  CHECK_FALSE(response.matches(longer));
  Request trailing = requests[1];
  trailing.shape = {2, 3};
  CHECK_FALSE(response.matches(trailing));
  CHECK(response.matches(requests[0]));
  CHECK(response.matches(requests[1]));
}

TEST_CASE("negotiation: the cache hits until one rank changes its first dim or splits",
          "[negotiation]") {
  ResponseCache cache(4);
  const std::vector<Request> gather = gather_requests("g", {2, 5, 1});
  const std::vector<Request> a2a = alltoall_requests("a2a", {{1, 2, 0}, {0, 0, 3}, {1, 1, 1}});
  REQUIRE(cache.put(build_response(gather)));
  REQUIRE(cache.put(build_response(a2a)));
  for (std::size_t r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(cache.lookup(gather[r]).state == ResponseCache::LookupState::kHit);
    CHECK(cache.lookup(a2a[r]).state == ResponseCache::LookupState::kHit);
  }

  // Rank 2 gathers 4 rows instead of 1: only its lookup misses, and its
  // invalidation makes every rank renegotiate.
  Request grown = gather[2];
  grown.shape = {4, 3};
  CHECK(cache.lookup(grown).state == ResponseCache::LookupState::kMismatch);
  CHECK(cache.lookup(gather[1]).state == ResponseCache::LookupState::kHit);

  // Rank 1 sends its 3 rows elsewhere: same first dimension, new splits.
  Request resplit = a2a[1];
  resplit.splits = {3, 0, 0};
  CHECK(cache.lookup(resplit).state == ResponseCache::LookupState::kMismatch);
  CHECK(cache.lookup(a2a[0]).state == ResponseCache::LookupState::kHit);

  // After renegotiation the new response replaces the old in its slot.
  std::vector<Request> regather = gather;
  regather[2] = grown;
  const uint32_t slot = *cache.slot_of("g");
  const auto put = cache.put(build_response(regather));
  REQUIRE(put);
  CHECK(put->slot == slot);
  CHECK(cache.lookup(grown).state == ResponseCache::LookupState::kHit);
  CHECK(cache.lookup(gather[2]).state == ResponseCache::LookupState::kMismatch);
}

}  // namespace herd::detail
