// The image-record payload (MXNet's IRHeader, struct 'IfQQ'), packed and
// unpacked little-endian.
#include "herd/data/image_record.h"

#include <cstring>
#include <limits>

#include "herd/error.h"

namespace herd::data {
namespace {

void store_le(uint8_t* into, uint64_t value, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) into[i] = static_cast<uint8_t>(value >> (8 * i));
}

uint64_t load_le(const uint8_t* from, std::size_t width) {
  uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value |= uint64_t{from[i]} << (8 * i);
  return value;
}

uint32_t float_bits(float value) {
  uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float bits_float(uint64_t bits) {
  const auto narrow = static_cast<uint32_t>(bits);
  float value = 0;
  std::memcpy(&value, &narrow, sizeof value);
  return value;
}

}  // namespace

std::vector<uint8_t> pack_image_record(const ImageRecordHeader& header,
                                       const std::vector<float>& labels, const void* payload,
                                       std::size_t payload_size) {
  if (labels.size() > std::numeric_limits<uint32_t>::max()) {
    throw Error("image record " + std::to_string(header.id) + ": " + std::to_string(labels.size()) +
                    " labels, more than the header's flag counts",
                ErrorKind::kInvalidArgument);
  }
  std::vector<uint8_t> record(kImageRecordHeaderSize + 4 * labels.size() + payload_size);
  uint8_t* out = record.data();
  store_le(out, labels.size(), 4);
  store_le(out + 4, labels.empty() ? float_bits(header.label) : 0, 4);
  store_le(out + 8, header.id, 8);
  store_le(out + 16, header.id2, 8);
  out += kImageRecordHeaderSize;
  for (const float label : labels) {
    store_le(out, float_bits(label), 4);
    out += 4;
  }
  if (payload_size > 0) std::memcpy(out, payload, payload_size);
  return record;
}

ImageRecord unpack_image_record(const uint8_t* record, std::size_t size, const std::string& where) {
  if (size < kImageRecordHeaderSize) {
    throw Error(where + ": the record is " + std::to_string(size) + " bytes, shorter than the " +
                std::to_string(kImageRecordHeaderSize) + "-byte image-record header");
  }
  ImageRecord unpacked;
  unpacked.header.flag = static_cast<uint32_t>(load_le(record, 4));
  unpacked.header.label = bits_float(load_le(record + 4, 4));
  unpacked.header.id = load_le(record + 8, 8);
  unpacked.header.id2 = load_le(record + 16, 8);
  const std::size_t after_header = size - kImageRecordHeaderSize;
  const uint64_t label_bytes = uint64_t{4} * unpacked.header.flag;
  if (label_bytes > after_header) {
    throw Error(where + ": the image-record header's flag counts " +
                std::to_string(unpacked.header.flag) + " float32 labels (" +
                std::to_string(label_bytes) + " bytes), but only " + std::to_string(after_header) +
                " bytes follow the header");
  }
  const uint8_t* labels = record + kImageRecordHeaderSize;
  if (unpacked.header.flag == 0) {
    unpacked.labels = {unpacked.header.label};
  } else {
    unpacked.labels.resize(unpacked.header.flag);
    for (uint32_t i = 0; i < unpacked.header.flag; ++i) {
      unpacked.labels[i] = bits_float(load_le(labels + 4 * i, 4));
    }
  }
  unpacked.payload = labels + label_bytes;
  unpacked.payload_size = static_cast<std::size_t>(after_header - label_bytes);
  return unpacked;
}

}  // namespace herd::data
