// The image-record payload of MXNet (ImageRecordIO::Header, Python IRHeader,
// struct 'IfQQ'): a 24-byte header, then `flag` float32 labels when flag > 0,
// then the image bytes (an encoded JPEG/PNG, or raw pixels).
//   uint32 flag    0: one label, in `label`; k > 0: k float32 labels follow
//   float  label   the label when flag == 0 (pack writes 0 when flag > 0)
//   uint64 id      the image's id (im2rec: its index in the .lst)
//   uint64 id2     reserved, 0
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd::data {

constexpr std::size_t kImageRecordHeaderSize = 24;

struct ImageRecordHeader {
  uint32_t flag = 0;
  float label = 0;
  uint64_t id = 0;
  uint64_t id2 = 0;
};

// A record split into its parts; `payload` points into the unpacked bytes.
struct ImageRecord {
  ImageRecordHeader header;
  // flag == 0: {header.label}; else the flag labels after the header.
  std::vector<float> labels;
  const uint8_t* payload = nullptr;
  std::size_t payload_size = 0;
};

// pack() as MXNet's: with `labels` empty the header goes out as given but
// with flag 0; otherwise flag = labels.size(), label = 0, and the labels
// precede the payload. Throws herd::Error for more labels than a uint32 holds.
std::vector<uint8_t> pack_image_record(const ImageRecordHeader& header,
                                       const std::vector<float>& labels, const void* payload,
                                       std::size_t payload_size);

// unpack(): throws herd::Error, starting with `where` (e.g. "train.rec:
// record at byte 1234"), when the record is shorter than the header or its
// flag counts more labels than the record holds.
ImageRecord unpack_image_record(const uint8_t* record, std::size_t size, const std::string& where);

}  // namespace herd::data
