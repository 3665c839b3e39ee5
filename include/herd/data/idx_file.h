// IDX files (MNIST's and Fashion-MNIST's format) of unsigned bytes: a
// big-endian header (magic 0x000008NN, NN dimensions; each dimension a
// uint32), then the bytes. Plain or gzip-compressed (zlib), read whole: IDX
// datasets are small.
//
// Errors name the file: missing, unreadable, a corrupt gzip stream, another
// magic, a size that is not exactly header + data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace herd::data {

struct IdxArray {
  std::vector<uint32_t> dims;  // e.g. {60000, 28, 28}
  std::vector<uint8_t> data;   // row-major, product(dims) bytes
};

IdxArray read_idx_file(const std::string& path);

}  // namespace herd::data
