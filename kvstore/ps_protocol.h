// The dist_async KVStore's requests and replies between a worker and a
// parameter server (carried by herd/parameter_server.h), in herd's byte
// encoding (common/byte_codec.h).
//
// A request names its store (every worker numbers its dist_async stores in
// creation order) and an operation. Key operations carry one slice of one
// key (kvstore/ps_placement.h): a push sends the slice's values, raw or
// compressed (2bit/1bit codes, the server dequantizes), and the server
// applies it with its UpdateStore, or, when the key holds nothing yet, takes
// it as the key's first value (upstream's init); a pull gets the slice's
// values back; a pushpull does both. Every reply says ok, or carries the
// server's error message.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "herd/kvstore.h"
#include "herd/parameter_server.h"
#include "herd/types.h"
#include "kvstore/gradient_compression.h"

namespace herd {
namespace kv {
namespace detail {

enum class PsOp : uint8_t {
  kPush = 1,
  kPull = 2,
  kPushPull = 3,
  kSetOptimizer = 4,
  kUpdateCount = 5,
  kCloseStore = 6,
};

struct PsRequest {
  PsOp op = PsOp::kPull;
  int32_t store = 0;
  // Key operations.
  int64_t key = 0;
  std::string name;  // the key as messages name it
  DataType dtype = DataType::kFloat32;
  int64_t offset = 0;             // the slice's first element in the whole value
  int64_t count = 0;              // the slice's elements
  CompressionParams compression;  // of `payload`; kNone: raw values
  // Push and pushpull: the slice's values (count elements of dtype), or
  // their codes (compressed_bytes(type, count) bytes).
  const uint8_t* payload = nullptr;
  std::size_t payload_bytes = 0;
  // kSetOptimizer: the config as text fields (optimizer_config_codec.h).
  std::map<std::string, std::string> optimizer;
};

// `payload` is copied after the header.
ps::Message encode_request(const PsRequest& request);
// `payload` points into `message`, which must outlive the result. Throws
// herd::Error naming what is malformed.
PsRequest decode_request(const ps::Message& message);

struct PsReply {
  bool ok = true;
  std::string error;
  int64_t update_count = 0;          // kUpdateCount
  const uint8_t* payload = nullptr;  // pull and pushpull: the slice's values
  std::size_t payload_bytes = 0;
};

ps::Message encode_reply(const PsReply& reply);
PsReply decode_reply(const ps::Message& message);

}  // namespace detail
}  // namespace kv
}  // namespace herd
