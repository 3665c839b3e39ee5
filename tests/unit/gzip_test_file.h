// gzip-compressed files for the tests of readers that accept them (IDX).
// Only test targets that link zlib include this.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "tests/unit/test_files.h"

namespace herd::testing {

// Writes `bytes` gzip-compressed as the file `name` in `dir`; returns its path.
inline std::string write_gzipped(const TempDir& dir, const std::string& name,
                                 const std::vector<uint8_t>& bytes) {
  const std::string path = dir.file(name);
  gzFile out = gzopen(path.c_str(), "wb");
  REQUIRE(out != nullptr);
  REQUIRE(gzwrite(out, bytes.data(), unsigned(bytes.size())) == int(bytes.size()));
  REQUIRE(gzclose(out) == Z_OK);
  return path;
}

}  // namespace herd::testing
