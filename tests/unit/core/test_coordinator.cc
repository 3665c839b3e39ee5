// Coordinator and build_response: completion only once every rank asked, in
// completion order, and mismatch messages that list every rank's value.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/coordinator.h"

namespace herd::detail {
namespace {

Request request(int rank, const std::string& name, std::vector<int64_t> shape = {4, 3}) {
  Request r;
  r.rank = rank;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

std::vector<std::string> names_of(const std::vector<Response>& responses) {
  std::vector<std::string> names;
  for (const Response& r : responses) names.push_back(r.name);
  return names;
}

}  // namespace

TEST_CASE("build_response: agreeing ranks give an execute response", "[coordinator]") {
  std::vector<Request> requests;
  for (int rank = 0; rank < 3; ++rank) {
    Request r = request(rank, "grad/fc1");
    r.dtype = DataType::kBFloat16;
    r.op = ReduceOp::kAverage;
    r.prescale = 0.5;
    r.postscale = 2.0;
    r.device = Device::gpu(1);
    requests.push_back(r);
  }
  Response response = build_response(requests);
  CHECK(response.type == ResponseType::kExecute);
  CHECK(response.collective == CollectiveType::kAllreduce);
  CHECK(response.name == "grad/fc1");
  CHECK(response.dtype == DataType::kBFloat16);
  CHECK(response.op == ReduceOp::kAverage);
  CHECK(response.prescale == 0.5);
  CHECK(response.postscale == 2.0);
  CHECK(response.device == Device::gpu(1));
  CHECK(response.shape == std::vector<int64_t>{4, 3});
  CHECK(response.error_message.empty());
  CHECK(response.matches(requests[2]));
}

TEST_CASE("build_response: shape mismatch on 2 ranks", "[coordinator]") {
  Response response =
      build_response({request(0, "grad/fc1", {4, 3}), request(1, "grad/fc1", {4, 2})});
  CHECK(response.type == ResponseType::kError);
  CHECK(response.name == "grad/fc1");
  CHECK(response.error_message ==
        "allreduce 'grad/fc1': shape mismatch: rank 0 [4,3], rank 1 [4,2]");
}

TEST_CASE("build_response: a mismatch lists every rank", "[coordinator]") {
  std::vector<Request> requests;
  for (int rank = 0; rank < 4; ++rank) requests.push_back(request(rank, "w"));
  requests[2].dtype = DataType::kFloat64;
  Response response = build_response(requests);
  CHECK(response.type == ResponseType::kError);
  CHECK(response.error_message ==
        "allreduce 'w': dtype mismatch: rank 0 float32, rank 1 float32, rank 2 float64, "
        "rank 3 float32");

  // A scalar on one rank.
  requests[2].dtype = DataType::kFloat32;
  requests[3].shape = {};
  CHECK(build_response(requests).error_message ==
        "allreduce 'w': shape mismatch: rank 0 [4,3], rank 1 [4,3], rank 2 [4,3], rank 3 []");
}

TEST_CASE("build_response: several clauses, in field order", "[coordinator]") {
  std::vector<Request> requests = {request(0, "b"), request(1, "b"), request(2, "b")};
  // Set in an order unlike the message's, which must not matter.
  requests[1].device = Device::gpu(1);
  requests[2].postscale = 0.1;
  requests[0].prescale = 1.0 / 3.0;
  requests[1].shape = {12};
  requests[2].op = ReduceOp::kMin;
  requests[1].dtype = DataType::kInt32;
  Response response = build_response(requests);
  CHECK(response.type == ResponseType::kError);
  CHECK(response.error_message ==
        "allreduce 'b': dtype mismatch: rank 0 float32, rank 1 int32, rank 2 float32; "
        "op mismatch: rank 0 sum, rank 1 sum, rank 2 min; "
        "shape mismatch: rank 0 [4,3], rank 1 [12], rank 2 [4,3]; "
        "prescale mismatch: rank 0 0.3333333333333333, rank 1 1, rank 2 1; "
        "postscale mismatch: rank 0 1, rank 1 1, rank 2 0.1; "
        "device mismatch: rank 0 cpu, rank 1 gpu, rank 2 cpu");
}

TEST_CASE("build_response: one rank agrees with itself", "[coordinator]") {
  Response response = build_response({request(0, "solo", {})});
  CHECK(response.type == ResponseType::kExecute);
  CHECK(response.shape.empty());
}

TEST_CASE("Coordinator: a name completes only when every rank asked", "[coordinator]") {
  Coordinator coordinator(3);
  REQUIRE(coordinator.add(request(0, "a")).is_ok());
  REQUIRE(coordinator.add(request(2, "a")).is_ok());
  CHECK(coordinator.take_ready().empty());
  CHECK(coordinator.num_pending() == 1);
  REQUIRE(coordinator.add(request(1, "a")).is_ok());
  CHECK(coordinator.num_pending() == 0);
  std::vector<Response> ready = coordinator.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].name == "a");
  CHECK(ready[0].type == ResponseType::kExecute);
  CHECK(coordinator.take_ready().empty());

  // The name left the table, so the next round may ask for it again.
  REQUIRE(coordinator.add(request(0, "a")).is_ok());
  CHECK(coordinator.num_pending() == 1);
}

TEST_CASE("Coordinator: responses come in completion order", "[coordinator]") {
  Coordinator coordinator(2);
  for (const char* name : {"z", "m", "a", "q"}) REQUIRE(coordinator.add(request(0, name)).is_ok());
  // Rank 1 completes them in another order, and "q" never.
  for (const char* name : {"m", "z", "a"}) REQUIRE(coordinator.add(request(1, name)).is_ok());
  CHECK(names_of(coordinator.take_ready()) == std::vector<std::string>{"m", "z", "a"});
  CHECK(coordinator.num_pending() == 1);
  REQUIRE(coordinator.add(request(1, "q")).is_ok());
  CHECK(names_of(coordinator.take_ready()) == std::vector<std::string>{"q"});
}

TEST_CASE("Coordinator: a mismatch becomes an error response", "[coordinator]") {
  Coordinator coordinator(2);
  REQUIRE(coordinator.add(request(1, "grad/fc1", {4, 2})).is_ok());
  REQUIRE(coordinator.add(request(0, "grad/fc1", {4, 3})).is_ok());
  std::vector<Response> ready = coordinator.take_ready();
  REQUIRE(ready.size() == 1);
  CHECK(ready[0].type == ResponseType::kError);
  CHECK(ready[0].error_message ==
        "allreduce 'grad/fc1': shape mismatch: rank 0 [4,3], rank 1 [4,2]");
}

TEST_CASE("Coordinator: duplicate and out-of-range requests fail", "[coordinator]") {
  Coordinator coordinator(2);
  REQUIRE(coordinator.add(request(1, "layer/w")).is_ok());
  Status duplicate = coordinator.add(request(1, "layer/w"));
  REQUIRE_FALSE(duplicate.is_ok());
  CHECK(duplicate.message() ==
        "rank 1 requested 'layer/w' again before the previous request for it completed");
  CHECK(coordinator.num_pending() == 1);

  Status too_high = coordinator.add(request(2, "layer/w"));
  REQUIRE_FALSE(too_high.is_ok());
  CHECK(too_high.message() == "request for 'layer/w' from rank 2, but the job has 2 ranks");
  Status negative = coordinator.add(request(-1, "other"));
  REQUIRE_FALSE(negative.is_ok());
  CHECK(negative.message().find("rank -1") != std::string::npos);

  // The failures left the table as it was.
  CHECK(coordinator.num_pending() == 1);
  REQUIRE(coordinator.add(request(0, "layer/w")).is_ok());
  CHECK(coordinator.take_ready().size() == 1);
}

TEST_CASE("Coordinator: a single rank completes at once", "[coordinator]") {
  Coordinator coordinator(1);
  REQUIRE(coordinator.add(request(0, "x")).is_ok());
  REQUIRE(coordinator.add(request(0, "y")).is_ok());
  CHECK(names_of(coordinator.take_ready()) == std::vector<std::string>{"x", "y"});
}

}  // namespace herd::detail
