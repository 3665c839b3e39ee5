#include "kvstore/ps_protocol.h"

#include <cstring>

#include <fmt/format.h>

#include "common/byte_codec.h"
#include "herd/error.h"

namespace herd {
namespace kv {
namespace detail {
namespace {

using herd::detail::ByteReader;
using herd::detail::ByteWriter;

bool has_key(PsOp op) { return op == PsOp::kPush || op == PsOp::kPull || op == PsOp::kPushPull; }
bool has_payload(PsOp op) { return op == PsOp::kPush || op == PsOp::kPushPull; }

void require(ByteReader& reader, bool valid, const std::string& what) {
  if (!valid) reader.fail(fmt::format("{}: {}", reader.what(), what));
}

void throw_if_failed(const ByteReader& reader) {
  if (!reader.ok()) throw Error("kvstore: parameter-server message: " + reader.status().message());
}

}  // namespace

ps::Message encode_request(const PsRequest& request) {
  ByteWriter writer;
  writer.u8(static_cast<uint8_t>(request.op));
  writer.i32(request.store);
  if (has_key(request.op)) {
    writer.i64(request.key);
    writer.string(request.name);
    writer.u8(static_cast<uint8_t>(request.dtype));
    writer.i64(request.offset);
    writer.i64(request.count);
    writer.u8(static_cast<uint8_t>(request.compression.type));
    writer.f64(request.compression.threshold);
  }
  if (has_payload(request.op)) {
    writer.u64(request.payload_bytes);
    writer.data().reserve(writer.size() + request.payload_bytes);
    writer.bytes(request.payload, request.payload_bytes);
  }
  if (request.op == PsOp::kSetOptimizer) {
    writer.u32(static_cast<uint32_t>(request.optimizer.size()));
    for (const auto& [field, value] : request.optimizer) {
      writer.string(field);
      writer.string(value);
    }
  }
  return writer.take();
}

PsRequest decode_request(const ps::Message& message) {
  ByteReader reader(message.data(), message.size(), "request");
  PsRequest request;
  const uint8_t op = reader.u8();
  require(reader, op >= 1 && op <= 6, fmt::format("unknown operation {}", op));
  request.op = static_cast<PsOp>(op);
  request.store = reader.i32();
  if (reader.ok() && has_key(request.op)) {
    request.key = reader.i64();
    request.name = reader.string();
    const uint8_t dtype = reader.u8();
    require(reader, dtype <= static_cast<uint8_t>(DataType::kInt16),
            fmt::format("unknown dtype {}", dtype));
    request.dtype = static_cast<DataType>(dtype);
    request.offset = reader.i64();
    request.count = reader.i64();
    require(reader, request.count >= 0, fmt::format("negative count {}", request.count));
    const uint8_t type = reader.u8();
    require(reader, type <= static_cast<uint8_t>(CompressionType::k1Bit),
            fmt::format("unknown compression {}", type));
    request.compression.type = static_cast<CompressionType>(type);
    request.compression.threshold = static_cast<float>(reader.f64());
  }
  if (reader.ok() && has_payload(request.op)) {
    const uint64_t bytes = reader.u64();
    request.payload = reader.range(bytes);
    request.payload_bytes = bytes;
    if (reader.ok()) {
      const int64_t expected =
          request.compression.type == CompressionType::kNone
              ? request.count * static_cast<int64_t>(element_size(request.dtype))
              : compressed_bytes(request.compression.type, request.count);
      require(reader, static_cast<int64_t>(bytes) == expected,
              fmt::format("{} bytes of values for {} elements, expected {}", bytes, request.count,
                          expected));
    }
  }
  if (reader.ok() && request.op == PsOp::kSetOptimizer) {
    const uint32_t fields = reader.u32();
    for (uint32_t i = 0; i < fields && reader.ok(); ++i) {
      std::string field = reader.string();
      request.optimizer[field] = reader.string();
    }
  }
  require(reader, reader.remaining() == 0, fmt::format("{} bytes left over", reader.remaining()));
  throw_if_failed(reader);
  return request;
}

ps::Message encode_reply(const PsReply& reply) {
  ByteWriter writer;
  writer.u8(reply.ok ? 1 : 0);
  writer.string(reply.error);
  writer.i64(reply.update_count);
  writer.u64(reply.payload_bytes);
  writer.data().reserve(writer.size() + reply.payload_bytes);
  writer.bytes(reply.payload, reply.payload_bytes);
  return writer.take();
}

PsReply decode_reply(const ps::Message& message) {
  ByteReader reader(message.data(), message.size(), "reply");
  PsReply reply;
  reply.ok = reader.u8() == 1;
  reply.error = reader.string();
  reply.update_count = reader.i64();
  const uint64_t bytes = reader.u64();
  reply.payload = reader.range(bytes);
  reply.payload_bytes = bytes;
  require(reader, reader.remaining() == 0, fmt::format("{} bytes left over", reader.remaining()));
  throw_if_failed(reader);
  return reply;
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
