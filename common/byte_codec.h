// ByteWriter and ByteReader: herd's one little-endian byte encoding, behind
// the negotiation messages (src/message.cc) and the checkpoint files
// (train/checkpoint.cc).
//
// Integers and floating-point numbers are written least significant byte
// first whatever the host, a string as its u32 byte length and its bytes. The
// reader never reads past its range: a read that would is a failure, kept
// (the first one sticks, and every later read is a no-op returning zero or
// empty), so a decoder can read a whole record and check once. The failure
// is a Status; a caller that reports with exceptions checks need() first
// with its own message, or throws status().message(). Header-only, used on
// whichever thread encodes or decodes; one object per thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "common/enforce.h"
#include "common/status.h"

namespace herd::detail {

class ByteWriter {
 public:
  void u8(uint8_t value) { bytes_.push_back(value); }
  void u32(uint32_t value) { append(value, 4); }
  void u64(uint64_t value) { append(value, 8); }
  void i32(int32_t value) { u32(static_cast<uint32_t>(value)); }
  void i64(int64_t value) { u64(static_cast<uint64_t>(value)); }
  void f64(double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    u64(bits);
  }
  // `count` floats, 4 bytes each.
  void f32s(const float* values, std::size_t count) {
    const std::size_t start = bytes_.size();
    bytes_.resize(start + 4 * count);
    for (std::size_t i = 0; i < count; ++i) {
      uint32_t bits = 0;
      std::memcpy(&bits, &values[i], sizeof bits);
      store(start + 4 * i, bits, 4);
    }
  }
  void bytes(const void* data, std::size_t size) {
    const auto* first = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), first, first + size);
  }
  // u32 length, then the bytes. A caller whose strings may be longer than
  // u32 allows checks first and reports in its own terms.
  void string(const std::string& text) {
    HERD_ENFORCE_LE(text.size(), std::size_t{std::numeric_limits<uint32_t>::max()});
    u32(static_cast<uint32_t>(text.size()));
    bytes(text.data(), text.size());
  }
  // Overwrites bytes already written, for a length or checksum known only
  // after what follows it.
  void patch_u32(std::size_t offset, uint32_t value) {
    HERD_ENFORCE_LE(offset + 4, bytes_.size());
    store(offset, value, 4);
  }
  void patch_u64(std::size_t offset, uint64_t value) {
    HERD_ENFORCE_LE(offset + 8, bytes_.size());
    store(offset, value, 8);
  }

  std::size_t size() const { return bytes_.size(); }
  std::vector<uint8_t>& data() { return bytes_; }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  void append(uint64_t value, int num_bytes) {
    for (int i = 0; i < num_bytes; ++i) bytes_.push_back(static_cast<uint8_t>(value >> (8 * i)));
  }
  void store(std::size_t offset, uint64_t value, int num_bytes) {
    for (int i = 0; i < num_bytes; ++i) {
      bytes_[offset + static_cast<std::size_t>(i)] = static_cast<uint8_t>(value >> (8 * i));
    }
  }

  std::vector<uint8_t> bytes_;
};

class ByteReader {
 public:
  // `what` names the bytes in failure messages: "truncated <what> at byte
  // 12: 4 bytes needed, 2 left".
  ByteReader(const uint8_t* data, std::size_t size, std::string what)
      : data_(data), size_(size), what_(std::move(what)) {}

  const Status& status() const { return status_; }
  bool ok() const { return status_.is_ok(); }
  const std::string& what() const { return what_; }
  std::size_t position() const { return position_; }
  std::size_t remaining() const { return size_ - position_; }

  uint8_t u8() { return static_cast<uint8_t>(load(1)); }
  uint32_t u32() { return static_cast<uint32_t>(load(4)); }
  uint64_t u64() { return load(8); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  double f64() {
    const uint64_t bits = u64();
    double value = 0.0;
    std::memcpy(&value, &bits, sizeof value);
    return value;
  }
  // `count` floats of 4 bytes; empty after a failure.
  std::vector<float> f32s(std::size_t count) {
    if (!ok()) return {};
    if (count > remaining() / 4) {
      fail(fmt::format("truncated {} at byte {}: {} floats of 4 bytes, {} bytes left", what_,
                       position_, count, remaining()));
      return {};
    }
    std::vector<float> values(count);
    for (std::size_t i = 0; i < count; ++i) {
      const auto bits = static_cast<uint32_t>(peek(position_ + 4 * i, 4));
      std::memcpy(&values[i], &bits, sizeof bits);
    }
    position_ += 4 * count;
    return values;
  }
  // `size` bytes, into `out`; nothing is written after a failure.
  void bytes(void* out, std::size_t size) {
    if (!need(size)) return;
    if (size > 0) std::memcpy(out, data_ + position_, size);
    position_ += size;
  }
  // The next `size` bytes, in place, skipped over; null after a failure.
  const uint8_t* range(std::size_t size) {
    if (!need(size)) return nullptr;
    const uint8_t* first = data_ + position_;
    position_ += size;
    return first;
  }
  // A u32 length, then that many bytes.
  std::string string() {
    const uint32_t length = u32();
    if (!need(length)) return {};
    std::string text(reinterpret_cast<const char*>(data_ + position_), length);
    position_ += length;
    return text;
  }

  // True if `num_bytes` more can be read; otherwise fails the reader (unless
  // it failed before) and returns false.
  bool need(std::size_t num_bytes) {
    if (!ok()) return false;
    if (num_bytes > remaining()) {
      fail(fmt::format("truncated {} at byte {}: {} bytes needed, {} left", what_, position_,
                       num_bytes, remaining()));
      return false;
    }
    return true;
  }
  // Records a failure found by the caller (a corrupt value); the first
  // failure sticks.
  void fail(std::string message) {
    if (ok()) status_ = Status::error(std::move(message));
  }

 private:
  uint64_t load(std::size_t num_bytes) {
    if (!need(num_bytes)) return 0;
    const uint64_t value = peek(position_, num_bytes);
    position_ += num_bytes;
    return value;
  }
  uint64_t peek(std::size_t at, std::size_t num_bytes) const {
    uint64_t value = 0;
    for (std::size_t i = 0; i < num_bytes; ++i) value |= uint64_t{data_[at + i]} << (8 * i);
    return value;
  }

  const uint8_t* data_;
  std::size_t size_;
  std::size_t position_ = 0;
  std::string what_;
  Status status_;
};

}  // namespace herd::detail
