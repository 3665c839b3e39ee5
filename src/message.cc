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
#include <cstring>
#include <limits>

#include <fmt/format.h>

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

class Writer {
 public:
  void u8(uint8_t value) { bytes_.push_back(value); }
  void u32(uint32_t value) { little_endian(value, 4); }
  void i32(int32_t value) { little_endian(static_cast<uint32_t>(value), 4); }
  void i64(int64_t value) { little_endian(static_cast<uint64_t>(value), 8); }
  void f64(double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    little_endian(bits, 8);
  }
  void string(const std::string& text) {
    length(text.size());
    bytes_.insert(bytes_.end(), text.begin(), text.end());
  }
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
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  void little_endian(uint64_t value, int num_bytes) {
    for (int i = 0; i < num_bytes; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }

  std::vector<uint8_t> bytes_;
};

// Reads fields in order; the first failure sticks, and every later read is a
// no-op, so decoders can read a whole entry and check once. Never reads past
// size_.
class Reader {
 public:
  Reader(const uint8_t* data, std::size_t size, const char* what)
      : data_(data), size_(size), what_(what) {}

  const Status& status() const { return status_; }
  bool ok() const { return status_.is_ok(); }
  std::size_t remaining() const { return size_ - pos_; }

  uint8_t u8() { return static_cast<uint8_t>(little_endian(1)); }
  uint32_t u32() { return static_cast<uint32_t>(little_endian(4)); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(little_endian(8)); }
  double f64() {
    uint64_t bits = little_endian(8);
    double value = 0.0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  std::string string() {
    uint32_t length = u32();
    if (!need(length)) return {};
    std::string text(reinterpret_cast<const char*>(data_ + pos_), length);
    pos_ += length;
    return text;
  }
  // An enum stored as one byte, checked against its last enumerator.
  template <typename Enum>
  Enum enumerator(const char* field, Enum last) {
    std::size_t at = pos_;
    uint8_t raw = u8();
    if (ok() && raw > static_cast<uint8_t>(last)) {
      fail(fmt::format("corrupt {} at byte {}: {} {} out of range", what_, at, field, raw));
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
      fail(fmt::format("truncated {} at byte {}: {} shapes announced, {} bytes left", what_, pos_,
                       count, remaining()));
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
      fail(fmt::format("truncated {} at byte {}: shape of {} dims, {} bytes left", what_, pos_,
                       ndims, remaining()));
      return {};
    }
    std::vector<int64_t> shape(ndims);
    for (int64_t& extent : shape) {
      std::size_t at = pos_;
      extent = i64();
      if (extent < 0) {
        fail(fmt::format("corrupt {} at byte {}: negative extent {}", what_, at, extent));
        return {};
      }
    }
    return shape;
  }
  // The list header; returns the entry count, checked against the bytes left.
  uint32_t header(uint8_t kind, std::size_t min_entry_bytes) {
    uint8_t version = u8();
    if (ok() && version != kFormatVersion) {
      fail(fmt::format("{} has format version {}, this build reads version {}", what_, version,
                       kFormatVersion));
    }
    std::size_t at = pos_;
    uint8_t found_kind = u8();
    if (ok() && found_kind != kind) {
      fail(fmt::format("corrupt {} at byte {}: kind byte {}", what_, at, found_kind));
    }
    uint32_t count = u32();
    if (ok() && count > remaining() / min_entry_bytes) {
      fail(fmt::format("truncated {} at byte {}: {} entries announced, {} bytes left", what_, pos_,
                       count, remaining()));
    }
    return ok() ? count : 0;
  }
  void finish() {
    if (ok() && pos_ != size_) {
      fail(fmt::format("corrupt {}: {} trailing bytes after byte {}", what_, size_ - pos_, pos_));
    }
  }

 private:
  bool need(std::size_t num_bytes) {
    if (!ok()) return false;
    if (num_bytes > remaining()) {
      fail(fmt::format("truncated {} at byte {}: {} bytes needed, {} left", what_, pos_, num_bytes,
                       remaining()));
      return false;
    }
    return true;
  }
  uint64_t little_endian(std::size_t num_bytes) {
    if (!need(num_bytes)) return 0;
    uint64_t value = 0;
    for (std::size_t i = 0; i < num_bytes; ++i) value |= uint64_t{data_[pos_ + i]} << (8 * i);
    pos_ += num_bytes;
    return value;
  }
  void fail(std::string message) { status_ = Status::error(std::move(message)); }

  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  const char* what_;
  Status status_;
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

bool Request::same_signature(const Request& other) const {
  return type == other.type && dtype == other.dtype && op == other.op &&
         prescale == other.prescale && postscale == other.postscale && device == other.device &&
         shape == other.shape && root == other.root && splits == other.splits &&
         group_shapes == other.group_shapes;
}

int64_t Request::num_elements() const {
  if (type != CollectiveType::kGroupedAllreduce) return product(shape);
  int64_t total = 0;
  for (const auto& member : group_shapes) total += product(member);
  return total;
}

int64_t Response::num_elements() const {
  if (collective != CollectiveType::kGroupedAllreduce) return product(shape);
  int64_t total = 0;
  for (const auto& member : group_shapes) total += product(member);
  return total;
}

std::size_t Response::num_bytes() const {
  return static_cast<std::size_t>(num_elements()) * element_size(dtype);
}

bool Response::matches(const Request& request) const {
  if (type == ResponseType::kError || collective != request.type || name != request.name ||
      dtype != request.dtype || op != request.op || prescale != request.prescale ||
      postscale != request.postscale || device != request.device || root != request.root ||
      group_shapes != request.group_shapes) {
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
    out.string(r.name);
    out.u8(static_cast<uint8_t>(r.dtype));
    out.u8(static_cast<uint8_t>(r.op));
    out.f64(r.prescale);
    out.f64(r.postscale);
    out.device(r.device);
    out.shape(r.shape);
    out.i32(r.root);
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
    out.string(r.name);
    out.u8(static_cast<uint8_t>(r.dtype));
    out.u8(static_cast<uint8_t>(r.op));
    out.f64(r.prescale);
    out.f64(r.postscale);
    out.device(r.device);
    out.shape(r.shape);
    out.i32(r.root);
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
    Request r;
    r.rank = in.i32();
    r.type = in.enumerator("collective", kLastCollectiveType);
    r.name = in.string();
    r.dtype = in.enumerator("dtype", kLastDataType);
    r.op = in.enumerator("op", ReduceOp::kProduct);
    r.prescale = in.f64();
    r.postscale = in.f64();
    r.device = in.device();
    r.shape = in.shape();
    r.root = in.i32();
    r.splits = in.shape();
    r.group_shapes = in.shapes();
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
    Response r;
    r.type = in.enumerator("response type", ResponseType::kError);
    r.collective = in.enumerator("collective", kLastCollectiveType);
    r.name = in.string();
    r.dtype = in.enumerator("dtype", kLastDataType);
    r.op = in.enumerator("op", ReduceOp::kProduct);
    r.prescale = in.f64();
    r.postscale = in.f64();
    r.device = in.device();
    r.shape = in.shape();
    r.root = in.i32();
    r.rank_extents = in.shape();
    r.group_shapes = in.shapes();
    r.error_message = in.string();
    responses.push_back(std::move(r));
  }
  in.finish();
  if (!in.ok()) return in.status();
  list->responses = std::move(responses);
  return Status::ok();
}

}  // namespace herd::detail
