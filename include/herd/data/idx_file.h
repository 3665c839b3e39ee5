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

// `dimensions` > 0 requires that many (the magic 0x000008NN with NN =
// dimensions: 3 for images, 1 for labels); 0 takes any number from 1 on.
IdxArray read_idx_file(const std::string& path, int dimensions = 0);

// The two steps of read_idx_file, for callers that add checks of their own
// around them. The whole content of `path`, gunzipped when it is
// gzip-compressed (a plain file passes through):
std::vector<uint8_t> read_idx_bytes(const std::string& path);
// and an IDX file's content parsed and checked; `name` (the file's path)
// begins every error message. The result's data is `bytes`' own storage, so
// a moved-in content is not copied.
IdxArray parse_idx(std::vector<uint8_t> bytes, const std::string& name, int dimensions = 0);

}  // namespace herd::data
