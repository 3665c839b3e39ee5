// Negotiation messages and their byte encoding.
//
// Wire format, every integer little-endian whatever the host:
//   list      := version:u8 kind:u8 count:u32 entry*count
//   request   := rank:i32 collective:u8 name dtype:u8 op:u8 prescale:f64
//                postscale:f64 device shape root:i32 splits:shape group_shapes
//   response  := type:u8 collective:u8 name dtype:u8 op:u8 prescale:f64
//                postscale:f64 device shape root:i32 rank_extents:shape
//                group_shapes error_message
//   group_shapes := count:u32 shape*count
//   name, error_message := length:u32 bytes
//   device    := type:u8 index:i32
//   shape     := ndims:u32 extent:i64*ndims
// The version byte lets a rank running another herd build fail with a clear
// message instead of misreading fields; the kind byte stops a RequestList
// from being decoded as a ResponseList. Called from the background thread.
#include "src/message.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "common/byte_codec.h"
#include "common/enforce.h"

namespace herd::detail {
namespace {

constexpr uint8_t kFormatVersion = 2;
// The last DataType: a dtype travels as its enumerator's value, and new types
// are appended to the enum (kInt16 last), so the bytes of the others never
// change.
constexpr DataType kLastDataType = DataType::kInt16;
constexpr uint8_t kRequestListKind = 'Q';
constexpr uint8_t kResponseListKind = 'R';

// Smallest encoded entries: a count claiming more entries than the remaining
// bytes could hold is rejected before anything is allocated for them.
constexpr std::size_t kMinRequestBytes = 4 + 1 + 4 + 1 + 1 + 8 + 8 + 1 + 4 + 4 + 4 + 4 + 4;
constexpr std::size_t kMinResponseBytes = 1 + 1 + 4 + 1 + 1 + 8 + 8 + 1 + 4 + 4 + 4 + 4 + 4 + 4;

int64_t product(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

// The message fields over the common byte encoding (common/byte_codec.h).
class Writer : public ByteWriter {
 public:
  void device(const Device& device) {
    u8(static_cast<uint8_t>(device.type));
    i32(device.index);
  }
  void shape(const std::vector<int64_t>& shape) {
    length(shape.size());
    for (int64_t extent : shape) i64(extent);
  }
  void shapes(const std::vector<std::vector<int64_t>>& shapes) {
    length(shapes.size());
    for (const auto& one : shapes) shape(one);
  }
  // Lengths and counts are u32 on the wire; nothing herd sends comes close.
  void length(std::size_t n) {
    HERD_ENFORCE_LE(n, std::size_t{std::numeric_limits<uint32_t>::max()});
    u32(static_cast<uint32_t>(n));
  }
  // The fields Request and Response share, name to root, in wire order.
  void arguments(const CollectiveArguments& a) {
    string(a.name);
    u8(static_cast<uint8_t>(a.dtype));
    u8(static_cast<uint8_t>(a.op));
    f64(a.prescale);
    f64(a.postscale);
    device(a.device);
    shape(a.shape);
    i32(a.root);
  }
};

// Reads fields in order; the first failure sticks (ByteReader), so decoders
// can read a whole entry and check once.
class Reader : public ByteReader {
 public:
  using ByteReader::ByteReader;

  // An enum stored as one byte, checked against its last enumerator.
  template <typename Enum>
  Enum enumerator(const char* field, Enum last) {
    std::size_t at = position();
    uint8_t raw = u8();
    if (ok() && raw > static_cast<uint8_t>(last)) {
      fail(fmt::format("corrupt {} at byte {}: {} {} out of range", what(), at, field, raw));
    }
    return ok() ? static_cast<Enum>(raw) : Enum{};
  }
  Device device() {
    Device device;
    device.type = enumerator("device type", DeviceType::kGPU);
    device.index = i32();
    return device;
  }
  std::vector<std::vector<int64_t>> shapes() {
    uint32_t count = u32();
    if (!ok()) return {};
    if (count > remaining() / 4) {
      fail(fmt::format("truncated {} at byte {}: {} shapes announced, {} bytes left", what(),
                       position(), count, remaining()));
      return {};
    }
    std::vector<std::vector<int64_t>> result;
    for (uint32_t i = 0; i < count && ok(); ++i) result.push_back(shape());
    return result;
  }
  std::vector<int64_t> shape() {
    uint32_t ndims = u32();
    if (!ok()) return {};
    if (ndims > remaining() / 8) {
      fail(fmt::format("truncated {} at byte {}: shape of {} dims, {} bytes left", what(),
                       position(), ndims, remaining()));
      return {};
    }
    std::vector<int64_t> shape(ndims);
    for (int64_t& extent : shape) {
      std::size_t at = position();
      extent = i64();
      if (extent < 0) {
        fail(fmt::format("corrupt {} at byte {}: negative extent {}", what(), at, extent));
        return {};
      }
    }
    return shape;
  }
  // The fields Request and Response share, name to root, in wire order.
  void arguments(CollectiveArguments* a) {
    a->name = string();
    a->dtype = enumerator("dtype", kLastDataType);
    a->op = enumerator("op", ReduceOp::kAdasum);
    a->prescale = f64();
    a->postscale = f64();
    a->device = device();
    a->shape = shape();
    a->root = i32();
  }
  // The list header; returns the entry count, checked against the bytes left.
  uint32_t header(uint8_t kind, std::size_t min_entry_bytes) {
    uint8_t version = u8();
    if (ok() && version != kFormatVersion) {
      fail(fmt::format("{} has format version {}, this build reads version {}", what(), version,
                       kFormatVersion));
    }
    std::size_t at = position();
    uint8_t found_kind = u8();
    if (ok() && found_kind != kind) {
      fail(fmt::format("corrupt {} at byte {}: kind byte {}", what(), at, found_kind));
    }
    uint32_t count = u32();
    if (ok() && count > remaining() / min_entry_bytes) {
      fail(fmt::format("truncated {} at byte {}: {} entries announced, {} bytes left", what(),
                       position(), count, remaining()));
    }
    return ok() ? count : 0;
  }
  // Fails when `a`'s elements (every member's, for a grouped allreduce) or
  // their bytes do not fit in int64_t, so that num_elements() and
  // num_bytes() of whatever decodes are defined. `at` is the entry's start.
  void check_size(const CollectiveArguments& a, CollectiveType collective, std::size_t at) {
    if (!ok()) return;
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    int64_t total = 0;
    bool fits = true;
    auto add = [&](const std::vector<int64_t>& shape) {
      int64_t count = 1;
      for (int64_t extent : shape) fits = fits && !__builtin_mul_overflow(count, extent, &count);
      fits = fits && !__builtin_add_overflow(total, count, &total);
    };
    if (collective == CollectiveType::kGroupedAllreduce) {
      for (const auto& member : a.group_shapes) add(member);
    } else {
      add(a.shape);
    }
    const auto element_bytes = static_cast<int64_t>(element_size(a.dtype));
    if (!fits || total > kMax / element_bytes) {
      fail(fmt::format("corrupt {} at byte {}: {} '{}' is larger than {} bytes", what(), at,
                       to_string(collective), a.name, kMax));
    }
  }
  void finish() {
    if (ok() && remaining() != 0) {
      fail(fmt::format("corrupt {}: {} trailing bytes after byte {}", what(), remaining(),
                       position()));
    }
  }
};

}  // namespace

const char* to_string(CollectiveType type) {
  switch (type) {
    case CollectiveType::kAllreduce: return "allreduce";
    case CollectiveType::kAllgather: return "allgather";
    case CollectiveType::kBroadcast: return "broadcast";
    case CollectiveType::kAlltoall: return "alltoall";
    case CollectiveType::kReducescatter: return "reducescatter";
    case CollectiveType::kBarrier: return "barrier";
    case CollectiveType::kGroupedAllreduce: return "grouped allreduce";
  }
  return "unknown collective";
}

bool CollectiveArguments::same_except_name_and_shape(const CollectiveArguments& other) const {
  return dtype == other.dtype && op == other.op && prescale == other.prescale &&
         postscale == other.postscale && device == other.device && root == other.root &&
         group_shapes == other.group_shapes;
}

int64_t CollectiveArguments::count_elements(CollectiveType collective) const {
  if (collective != CollectiveType::kGroupedAllreduce) return product(shape);
  int64_t total = 0;
  for (const auto& member : group_shapes) total += product(member);
  return total;
}

bool Request::same_signature(const Request& other) const {
  return type == other.type && same_except_name_and_shape(other) && shape == other.shape &&
         splits == other.splits;
}

int64_t Request::num_elements() const { return count_elements(type); }

int64_t Response::num_elements() const { return count_elements(collective); }

std::size_t Response::num_bytes() const {
  return static_cast<std::size_t>(num_elements()) * element_size(dtype);
}

bool Response::matches(const Request& request) const {
  if (type == ResponseType::kError || collective != request.type || name != request.name ||
      !same_except_name_and_shape(request)) {
    return false;
  }
  const auto rank = static_cast<std::size_t>(request.rank);
  switch (collective) {
    case CollectiveType::kAllgather:
      // Ranks differ in the first dimension: compare this rank's own.
      return !request.shape.empty() && shape.size() == request.shape.size() &&
             std::equal(shape.begin() + 1, shape.end(), request.shape.begin() + 1) &&
             rank < rank_extents.size() && rank_extents[rank] == request.shape[0];
    case CollectiveType::kAlltoall: {
      if (request.shape.empty() || shape.size() != request.shape.size() ||
          !std::equal(shape.begin() + 1, shape.end(), request.shape.begin() + 1)) {
        return false;
      }
      const std::size_t p = request.splits.size();
      if (p == 0 || rank_extents.size() != p * p || rank >= p) return false;
      return std::equal(request.splits.begin(), request.splits.end(),
                        rank_extents.begin() + static_cast<std::ptrdiff_t>(rank * p));
    }
    default: return shape == request.shape;
  }
}

std::vector<uint8_t> encode(const RequestList& list) {
  Writer out;
  out.u8(kFormatVersion);
  out.u8(kRequestListKind);
  out.length(list.requests.size());
  for (const Request& r : list.requests) {
    out.i32(r.rank);
    out.u8(static_cast<uint8_t>(r.type));
    out.arguments(r);
    out.shape(r.splits);
    out.shapes(r.group_shapes);
  }
  return out.take();
}

std::vector<uint8_t> encode(const ResponseList& list) {
  Writer out;
  out.u8(kFormatVersion);
  out.u8(kResponseListKind);
  out.length(list.responses.size());
  for (const Response& r : list.responses) {
    out.u8(static_cast<uint8_t>(r.type));
    out.u8(static_cast<uint8_t>(r.collective));
    out.arguments(r);
    out.shape(r.rank_extents);
    out.shapes(r.group_shapes);
    out.string(r.error_message);
  }
  return out.take();
}

Status decode(const uint8_t* data, std::size_t size, RequestList* list) {
  Reader in(data, size, "RequestList");
  uint32_t count = in.header(kRequestListKind, kMinRequestBytes);
  std::vector<Request> requests;
  requests.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    const std::size_t at = in.position();
    Request r;
    r.rank = in.i32();
    r.type = in.enumerator("collective", kLastCollectiveType);
    in.arguments(&r);
    r.splits = in.shape();
    r.group_shapes = in.shapes();
    in.check_size(r, r.type, at);
    requests.push_back(std::move(r));
  }
  in.finish();
  if (!in.ok()) return in.status();
  list->requests = std::move(requests);
  return Status::ok();
}

Status decode(const uint8_t* data, std::size_t size, ResponseList* list) {
  Reader in(data, size, "ResponseList");
  uint32_t count = in.header(kResponseListKind, kMinResponseBytes);
  std::vector<Response> responses;
  responses.reserve(count);
  for (uint32_t i = 0; i < count && in.ok(); ++i) {
    const std::size_t at = in.position();
    Response r;
    r.type = in.enumerator("response type", ResponseType::kError);
    r.collective = in.enumerator("collective", kLastCollectiveType);
    in.arguments(&r);
    r.rank_extents = in.shape();
    r.group_shapes = in.shapes();
    r.error_message = in.string();
    in.check_size(r, r.collective, at);
    responses.push_back(std::move(r));
  }
  in.finish();
  if (!in.ok()) return in.status();
  list->responses = std::move(responses);
  return Status::ok();
}

}  // namespace herd::detail
