// dist_async's placement of keys on the parameter servers against values
// computed by hand from upstream's rule (small keys: server (key * 9973) mod
// S; big keys: part i has round(n / S * (i + 1)) - round(n / S * i)
// elements), and the request and reply encodings.
#include <catch2/catch.hpp>

#include <cstring>

#include "herd/error.h"
#include "kvstore/ps_placement.h"
#include "kvstore/ps_protocol.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

constexpr int64_t kBound = 1000000;

int small_server(int64_t key, int servers) {
  const std::vector<Slice> slices = place_key(key, 10, servers, kBound);
  REQUIRE(slices.size() == 1);
  CHECK(slices[0].offset == 0);
  CHECK(slices[0].count == 10);
  return slices[0].server;
}

}  // namespace

TEST_CASE("ps placement: a small key lives whole on server (key * 9973) mod S", "[kvstore]") {
  // One server holds everything.
  for (int64_t key : {0, 1, 3, 7, 123456}) CHECK(small_server(key, 1) == 0);
  // 9973 is odd: odd keys to server 1 of 2, even keys to server 0.
  CHECK(small_server(0, 2) == 0);
  CHECK(small_server(1, 2) == 1);
  CHECK(small_server(3, 2) == 1);  // 29919
  CHECK(small_server(4, 2) == 0);  // 39892
  CHECK(small_server(5, 2) == 1);  // 49865
  // 9973 = 3 * 3324 + 1, so (key * 9973) mod 3 = key mod 3.
  CHECK(small_server(1, 3) == 1);   // 9973
  CHECK(small_server(2, 3) == 2);   // 19946
  CHECK(small_server(3, 3) == 0);   // 29919
  CHECK(small_server(7, 3) == 1);   // 69811
  CHECK(small_server(-1, 3) == 2);  // -9973, taken non-negative
  // Large ids do not overflow: 10^15 * 9973 mod 2 = 0, mod 3 = 10^15 mod 3 = 1.
  CHECK(small_server(1000000000000000, 2) == 0);
  CHECK(small_server(1000000000000000, 3) == 1);
}

TEST_CASE("ps placement: below the bound a key is small, at the bound it is split", "[kvstore]") {
  CHECK(place_key(3, kBound - 1, 3, kBound) == std::vector<Slice>{{0, 0, kBound - 1}});
  // 10^6 / 3 = 333333.33: round gives 333333, 666667, 1000000.
  CHECK(place_key(3, kBound, 3, kBound) ==
        std::vector<Slice>{{0, 0, 333333}, {1, 333333, 333334}, {2, 666667, 333333}});
  CHECK(place_key(3, kBound, 1, kBound) == std::vector<Slice>{{0, 0, kBound}});
  CHECK(place_key(3, kBound, 2, kBound) == std::vector<Slice>{{0, 0, 500000}, {1, 500000, 500000}});
}

TEST_CASE("ps placement: big keys split with upstream's rounding", "[kvstore]") {
  // 10 / 3: round(3.33) = 3, round(6.67) = 7, 10.
  CHECK(place_key(0, 10, 3, 10) == std::vector<Slice>{{0, 0, 3}, {1, 3, 4}, {2, 7, 3}});
  // 5 / 2 = 2.5 rounds half away from zero, to 3.
  CHECK(place_key(0, 5, 2, 5) == std::vector<Slice>{{0, 0, 3}, {1, 3, 2}});
  // 7 / 2 = 3.5 -> 4.
  CHECK(place_key(9, 7, 2, 1) == std::vector<Slice>{{0, 0, 4}, {1, 4, 3}});
  // 1 / 3: round(0.33) = 0, round(0.67) = 1, 1: empty slices stay.
  CHECK(place_key(9, 1, 3, 1) == std::vector<Slice>{{0, 0, 0}, {1, 0, 1}, {2, 1, 0}});
  // The key's id plays no part in a split.
  CHECK(place_key(1, 2500, 2, 1000) == place_key(2, 2500, 2, 1000));
  CHECK(place_key(1, 2500, 2, 1000) == std::vector<Slice>{{0, 0, 1250}, {1, 1250, 1250}});
}

TEST_CASE("ps protocol: requests and replies round trip", "[kvstore]") {
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  PsRequest push;
  push.op = PsOp::kPushPull;
  push.store = 7;
  push.key = 42;
  push.name = "\"fc.weight\"";
  push.dtype = DataType::kFloat32;
  push.offset = 100;
  push.count = 3;
  push.payload = reinterpret_cast<const uint8_t*>(values.data());
  push.payload_bytes = sizeof(float) * values.size();
  const ps::Message message = encode_request(push);
  const PsRequest decoded = decode_request(message);
  CHECK(decoded.op == PsOp::kPushPull);
  CHECK(decoded.store == 7);
  CHECK(decoded.key == 42);
  CHECK(decoded.name == "\"fc.weight\"");
  CHECK(decoded.offset == 100);
  CHECK(decoded.count == 3);
  CHECK(decoded.compression.type == CompressionType::kNone);
  REQUIRE(decoded.payload_bytes == 12);
  CHECK(std::memcmp(decoded.payload, values.data(), 12) == 0);

  PsRequest optimizer;
  optimizer.op = PsOp::kSetOptimizer;
  optimizer.optimizer = {{"kind", "sgd"}, {"sgd.lr", "0.5"}};
  CHECK(decode_request(encode_request(optimizer)).optimizer == optimizer.optimizer);

  PsReply reply;
  reply.ok = false;
  reply.error = "no optimizer";
  reply.update_count = 12;
  reply.payload = reinterpret_cast<const uint8_t*>(values.data());
  reply.payload_bytes = 8;
  const PsReply back = decode_reply(encode_reply(reply));
  CHECK_FALSE(back.ok);
  CHECK(back.error == "no optimizer");
  CHECK(back.update_count == 12);
  REQUIRE(back.payload_bytes == 8);
  CHECK(std::memcmp(back.payload, values.data(), 8) == 0);
}

TEST_CASE("ps protocol: malformed requests are refused by name", "[kvstore]") {
  PsRequest push;
  push.op = PsOp::kPush;
  push.count = 4;  // 16 bytes of float32 expected
  const std::vector<uint8_t> bytes(8, 0);
  push.payload = bytes.data();
  push.payload_bytes = bytes.size();
  CHECK_THROWS_WITH(decode_request(encode_request(push)),
                    Catch::Contains("8 bytes of values for 4 elements, expected 16"));
  ps::Message truncated = encode_request(push);
  truncated.resize(5);
  CHECK_THROWS_AS(decode_request(truncated), Error);
  ps::Message unknown = {99, 0, 0, 0, 0};
  CHECK_THROWS_WITH(decode_request(unknown), Catch::Contains("unknown operation 99"));
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
