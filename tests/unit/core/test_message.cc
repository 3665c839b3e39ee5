// Wire messages: round trips over every enum value and odd shapes and names,
// and clean failure on every truncation and on corrupt bytes.
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/message.h"

namespace herd::detail {
namespace {

const std::vector<DataType> kDataTypes = {
    DataType::kUInt8,   DataType::kInt8,    DataType::kInt32,
    DataType::kInt64,   DataType::kFloat16, DataType::kBFloat16,
    DataType::kFloat32, DataType::kFloat64, DataType::kInt16};
const std::vector<ReduceOp> kOps = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin,
                                    ReduceOp::kMax, ReduceOp::kProduct, ReduceOp::kAdasum};
const std::vector<Device> kDevices = {Device::cpu(), Device::gpu(0), Device::gpu(7)};
const std::vector<std::vector<int64_t>> kShapes = {
    {}, {0}, {1}, {4, 3}, {2, 0, 5}, {1 << 20, 1 << 12}, {1, 1, 1, 1, 1, 1, 1, 1}};
const std::vector<std::string> kNames = {"grad/fc1",
                                         "",
                                         "a",
                                         "тензор/градиент",
                                         "层/权重",
                                         "emoji 🚀",
                                         std::string("nul\0inside", 10),
                                         std::string(300, 'x')};
const std::vector<double> kScales = {1.0,       0.5,   -0.0,
                                     1.0 / 3.0, 1e300, std::numeric_limits<double>::denorm_min()};

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

RequestList many_requests() {
  RequestList list;
  std::size_t i = 0;
  for (DataType dtype : kDataTypes) {
    for (ReduceOp op : kOps) {
      for (const Device& device : kDevices) {
        Request r;
        r.rank = static_cast<int32_t>(i % 5);
        r.name = kNames[i % kNames.size()] + std::to_string(i);
        r.dtype = dtype;
        r.op = op;
        r.prescale = kScales[i % kScales.size()];
        r.postscale = kScales[(i + 1) % kScales.size()];
        r.device = device;
        r.shape = kShapes[i % kShapes.size()];
        list.requests.push_back(r);
        ++i;
      }
    }
  }
  return list;
}

ResponseList many_responses() {
  ResponseList list;
  std::size_t i = 0;
  for (const Request& r : many_requests().requests) {
    Response response;
    response.type = i % 3 == 0 ? ResponseType::kError : ResponseType::kExecute;
    response.name = r.name;
    response.dtype = r.dtype;
    response.op = r.op;
    response.prescale = r.prescale;
    response.postscale = r.postscale;
    response.device = r.device;
    response.shape = r.shape;
    if (response.type == ResponseType::kError) response.error_message = "mismatch ✗ " + r.name;
    list.responses.push_back(response);
    ++i;
  }
  return list;
}

void check_equal(const Request& a, const Request& b) {
  CHECK(a.rank == b.rank);
  CHECK(a.type == b.type);
  CHECK(a.name == b.name);
  CHECK(a.dtype == b.dtype);
  CHECK(a.op == b.op);
  CHECK(same_bits(a.prescale, b.prescale));
  CHECK(same_bits(a.postscale, b.postscale));
  CHECK(a.device == b.device);
  CHECK(a.shape == b.shape);
}

void check_equal(const Response& a, const Response& b) {
  CHECK(a.type == b.type);
  CHECK(a.collective == b.collective);
  CHECK(a.name == b.name);
  CHECK(a.dtype == b.dtype);
  CHECK(a.op == b.op);
  CHECK(same_bits(a.prescale, b.prescale));
  CHECK(same_bits(a.postscale, b.postscale));
  CHECK(a.device == b.device);
  CHECK(a.shape == b.shape);
  CHECK(a.error_message == b.error_message);
}

}  // namespace

TEST_CASE("message: RequestList round trip", "[message]") {
  RequestList sent = many_requests();
  REQUIRE(sent.requests.size() == kDataTypes.size() * kOps.size() * kDevices.size());
  std::vector<uint8_t> bytes = encode(sent);
  RequestList received;
  REQUIRE(decode(bytes.data(), bytes.size(), &received).is_ok());
  REQUIRE(received.requests.size() == sent.requests.size());
  for (std::size_t i = 0; i < sent.requests.size(); ++i) {
    INFO("request " << i);
    check_equal(received.requests[i], sent.requests[i]);
  }
}

TEST_CASE("message: ResponseList round trip", "[message]") {
  ResponseList sent = many_responses();
  std::vector<uint8_t> bytes = encode(sent);
  ResponseList received;
  REQUIRE(decode(bytes.data(), bytes.size(), &received).is_ok());
  REQUIRE(received.responses.size() == sent.responses.size());
  for (std::size_t i = 0; i < sent.responses.size(); ++i) {
    INFO("response " << i);
    check_equal(received.responses[i], sent.responses[i]);
  }
}

TEST_CASE("message: empty lists round trip", "[message]") {
  std::vector<uint8_t> bytes = encode(RequestList{});
  RequestList requests;
  requests.requests.resize(3);  // replaced by the decoded (empty) list
  REQUIRE(decode(bytes.data(), bytes.size(), &requests).is_ok());
  CHECK(requests.requests.empty());

  bytes = encode(ResponseList{});
  ResponseList responses;
  REQUIRE(decode(bytes.data(), bytes.size(), &responses).is_ok());
  CHECK(responses.responses.empty());
}

TEST_CASE("message: encoding is little-endian whatever the host", "[message]") {
  RequestList list;
  Request r;
  r.rank = 0x01020304;
  list.requests.push_back(r);
  std::vector<uint8_t> bytes = encode(list);
  REQUIRE(bytes.size() > 10);
  // header: version, kind, count (u32), then the rank.
  CHECK(bytes[2] == 1);
  CHECK(bytes[3] == 0);
  CHECK(bytes[6] == 0x04);
  CHECK(bytes[9] == 0x01);
}

TEST_CASE("message: every truncation fails cleanly", "[message]") {
  const RequestList all_requests = many_requests();
  RequestList requests;
  requests.requests.assign(all_requests.requests.begin(), all_requests.requests.begin() + 6);
  std::vector<uint8_t> bytes = encode(requests);
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    INFO("RequestList prefix of " << size << " of " << bytes.size() << " bytes");
    // A copy of exactly `size` bytes, so a sanitizer catches any overread.
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
    RequestList out;
    Status status = decode(prefix.data(), prefix.size(), &out);
    REQUIRE_FALSE(status.is_ok());
    CHECK(status.message().find("RequestList") != std::string::npos);
    CHECK(out.requests.empty());
  }

  const ResponseList all_responses = many_responses();
  ResponseList responses;
  responses.responses.assign(all_responses.responses.begin(), all_responses.responses.begin() + 6);
  bytes = encode(responses);
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    INFO("ResponseList prefix of " << size << " of " << bytes.size() << " bytes");
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size));
    ResponseList out;
    Status status = decode(prefix.data(), prefix.size(), &out);
    REQUIRE_FALSE(status.is_ok());
    CHECK(status.message().find("ResponseList") != std::string::npos);
  }
}

TEST_CASE("message: truncation names the byte", "[message]") {
  RequestList list;
  Request r;
  r.name = std::string(20, 'n');
  list.requests.push_back(r);
  std::vector<uint8_t> bytes = encode(list);
  RequestList out;
  // Cut inside the splits' length, which starts at byte
  // 6 + 4+1+4+20 + 1+1 + 8+8 + 1+4 + 4 (shape) + 4 (root) = 66.
  Status status = decode(bytes.data(), 68, &out);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == "truncated RequestList at byte 66: 4 bytes needed, 2 left");
}

TEST_CASE("message: corrupt bytes fail cleanly", "[message]") {
  RequestList list;
  Request r;
  r.name = "w";
  list.requests.push_back(r);
  const std::vector<uint8_t> good = encode(list);
  // Offsets in that encoding: 0 version, 1 kind, 2 count, 6 rank, 10 collective,
  // 11 name length, 15 name, 16 dtype, 17 op, 18 prescale, 26 postscale,
  // 34 device type, 35 device index, 39 ndims, 43 root, 47 splits length,
  // 51 group_shapes count; 55 bytes in all.
  struct Corruption {
    std::size_t offset;
    uint8_t value;
    std::string message;
  };
  const std::vector<Corruption> cases = {
      {0, 9, "RequestList has format version 9, this build reads version 2"},
      {1, 'R', "corrupt RequestList at byte 1: kind byte 82"},
      {10, 7, "corrupt RequestList at byte 10: collective 7 out of range"},
      {16, 9, "corrupt RequestList at byte 16: dtype 9 out of range"},
      {16, 255, "corrupt RequestList at byte 16: dtype 255 out of range"},
      {17, 6, "corrupt RequestList at byte 17: op 6 out of range"},
      {34, 2, "corrupt RequestList at byte 34: device type 2 out of range"},
      {11, 200, "truncated RequestList at byte 15: 200 bytes needed, 40 left"},
      {2, 2, "truncated RequestList at byte 6: 2 entries announced, 49 bytes left"},
      {39, 5, "truncated RequestList at byte 43: shape of 5 dims, 12 bytes left"},
      {51, 9, "truncated RequestList at byte 55: 9 shapes announced, 0 bytes left"},
  };
  for (const Corruption& c : cases) {
    INFO("byte " << c.offset << " = " << int{c.value});
    std::vector<uint8_t> bytes = good;
    bytes[c.offset] = c.value;
    RequestList out;
    Status status = decode(bytes.data(), bytes.size(), &out);
    REQUIRE_FALSE(status.is_ok());
    CHECK(status.message() == c.message);
  }

  std::vector<uint8_t> trailing = good;
  trailing.push_back(0);
  RequestList out;
  Status status = decode(trailing.data(), trailing.size(), &out);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == "corrupt RequestList: 1 trailing bytes after byte 55");
}

TEST_CASE("message: a negative extent and a bad response type are rejected", "[message]") {
  RequestList list;
  Request r;
  r.shape = {-3};
  list.requests.push_back(r);
  std::vector<uint8_t> bytes = encode(list);
  RequestList requests;
  Status status = decode(bytes.data(), bytes.size(), &requests);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == "corrupt RequestList at byte 42: negative extent -3");

  ResponseList responses;
  responses.responses.push_back(Response{});
  bytes = encode(responses);
  bytes[6] = 2;  // the response type
  ResponseList out;
  status = decode(bytes.data(), bytes.size(), &out);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == "corrupt ResponseList at byte 6: response type 2 out of range");

  // A RequestList is not a ResponseList.
  std::vector<uint8_t> request_bytes = encode(RequestList{});
  status = decode(request_bytes.data(), request_bytes.size(), &out);
  REQUIRE_FALSE(status.is_ok());
}

TEST_CASE("message: signatures, matches and sizes", "[message]") {
  Request a;
  a.rank = 0;
  a.name = "w";
  a.dtype = DataType::kFloat16;
  a.shape = {4, 3};
  Request b = a;
  b.rank = 3;
  b.name = "other";
  CHECK(a.same_signature(b));  // rank and name are not compared

  auto differs = [&](auto change) {
    Request c = a;
    change(c);
    return !a.same_signature(c);
  };
  CHECK(differs([](Request& c) { c.dtype = DataType::kFloat32; }));
  CHECK(differs([](Request& c) { c.op = ReduceOp::kMax; }));
  CHECK(differs([](Request& c) { c.prescale = 2.0; }));
  CHECK(differs([](Request& c) { c.postscale = 0.5; }));
  CHECK(differs([](Request& c) { c.device = Device::gpu(0); }));
  CHECK(differs([](Request& c) { c.shape = {3, 4}; }));
  CHECK(differs([](Request& c) { c.shape = {}; }));

  CHECK(a.num_elements() == 12);
  Request scalar;
  CHECK(scalar.num_elements() == 1);

  Response response;
  response.name = "w";
  response.dtype = DataType::kFloat16;
  response.shape = {4, 3};
  CHECK(response.num_elements() == 12);
  CHECK(response.num_bytes() == 24);
  CHECK(response.matches(a));
  CHECK_FALSE(response.matches(b));  // other name
  Request moved = a;
  moved.device = Device::gpu(1);
  CHECK_FALSE(response.matches(moved));
  response.type = ResponseType::kError;
  CHECK_FALSE(response.matches(a));  // an error response executes nothing

  Response empty;
  empty.shape = {0, 5};
  CHECK(empty.num_bytes() == 0);
  CHECK(std::string(to_string(CollectiveType::kAllreduce)) == "allreduce");
}

// The wire format byte for byte, as the comment at the top of src/message.cc
// lays it out: ranks running different builds of herd read each other's
// messages only while these bytes stay the same.
TEST_CASE("message: the encoded bytes of a request and a response", "[message]") {
  Request request;
  request.rank = 3;
  request.type = CollectiveType::kBroadcast;
  request.name = "ab";
  request.dtype = DataType::kInt64;
  request.op = ReduceOp::kMax;
  request.prescale = 0.5;
  request.postscale = 2.0;
  request.device = Device::gpu(1);
  request.shape = {2, 3};
  request.root = 1;
  request.splits = {4};
  request.group_shapes = {{5}, {}};
  const std::vector<uint8_t> request_bytes = {
      0x02, 0x51,                                      // version 2, kind 'Q'
      0x01, 0x00, 0x00, 0x00,                          // count 1
      0x03, 0x00, 0x00, 0x00,                          // rank 3
      0x02,                                            // collective: broadcast
      0x02, 0x00, 0x00, 0x00,                          // name: length 2
      0x61, 0x62,                                      // "ab"
      0x03, 0x03,                                      // dtype int64, op max
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0, 0x3f,  // prescale 0.5
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x40,  // postscale 2.0
      0x01, 0x01, 0x00, 0x00, 0x00,                    // device gpu:1
      0x02, 0x00, 0x00, 0x00,                          // shape: 2 dims
      0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 2
      0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 3
      0x01, 0x00, 0x00, 0x00,                          // root 1
      0x01, 0x00, 0x00, 0x00,                          // splits: 1 dim
      0x04, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 4
      0x02, 0x00, 0x00, 0x00,                          // group_shapes: 2
      0x01, 0x00, 0x00, 0x00,                          // [5]: 1 dim
      0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 5
      0x00, 0x00, 0x00, 0x00,                          // []: 0 dims
  };
  CHECK(encode(RequestList{{request}}) == request_bytes);
  RequestList requests;
  REQUIRE(decode(request_bytes.data(), request_bytes.size(), &requests).is_ok());
  REQUIRE(requests.requests.size() == 1);
  check_equal(requests.requests[0], request);
  CHECK(requests.requests[0].root == 1);
  CHECK(requests.requests[0].splits == request.splits);
  CHECK(requests.requests[0].group_shapes == request.group_shapes);

  Response response;
  response.type = ResponseType::kError;
  response.collective = CollectiveType::kAllgather;
  response.name = "g";
  response.dtype = DataType::kFloat32;
  response.op = ReduceOp::kSum;
  response.prescale = 1.0;
  response.postscale = -0.0;
  response.shape = {6};
  response.rank_extents = {6, 7};
  response.error_message = "bad";
  const std::vector<uint8_t> response_bytes = {
      0x02, 0x52,                                      // version 2, kind 'R'
      0x01, 0x00, 0x00, 0x00,                          // count 1
      0x01, 0x01,                                      // type error, collective: allgather
      0x01, 0x00, 0x00, 0x00,                          // name: length 1
      0x67,                                            // "g"
      0x06, 0x00,                                      // dtype float32, op sum
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f,  // prescale 1.0
      0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,  // postscale -0.0
      0x00, 0x00, 0x00, 0x00, 0x00,                    // device cpu
      0x01, 0x00, 0x00, 0x00,                          // shape: 1 dim
      0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 6
      0x00, 0x00, 0x00, 0x00,                          // root 0
      0x02, 0x00, 0x00, 0x00,                          // rank_extents: 2
      0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 6
      0x07, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // 7
      0x00, 0x00, 0x00, 0x00,                          // group_shapes: 0
      0x03, 0x00, 0x00, 0x00,                          // error_message: length 3
      0x62, 0x61, 0x64,                                // "bad"
  };
  CHECK(encode(ResponseList{{response}}) == response_bytes);
  ResponseList responses;
  REQUIRE(decode(response_bytes.data(), response_bytes.size(), &responses).is_ok());
  REQUIRE(responses.responses.size() == 1);
  check_equal(responses.responses[0], response);
  CHECK(responses.responses[0].rank_extents == response.rank_extents);
}

}  // namespace herd::detail
