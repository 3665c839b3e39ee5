// herd::data's IDX reader: synthetic files written here byte by byte (plain
// and gzip-compressed), each way a file can be wrong, and the installed
// Fashion-MNIST test labels when the Debian package is there.
#include <cstdint>
#include <string>
#include <vector>

#include <sys/stat.h>

#include <catch2/catch.hpp>

#include "herd/data/idx_file.h"
#include "herd/error.h"
#include "tests/unit/fuzz/byte_mutator.h"
#include "tests/unit/gzip_test_file.h"

namespace herd::data {
namespace {

using herd::testing::read_file;
using herd::testing::TempDir;
using herd::testing::write_gzipped;

void put_be32(std::vector<uint8_t>& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(value >> shift));
}

// An IDX file: the magic, the dimensions, then `data_bytes` bytes i * 31 % 256.
std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                               std::size_t data_bytes) {
  std::vector<uint8_t> bytes;
  put_be32(bytes, magic);
  for (uint32_t dim : dims) put_be32(bytes, dim);
  for (std::size_t i = 0; i < data_bytes; ++i) bytes.push_back(uint8_t(i * 31 % 256));
  return bytes;
}

std::vector<uint8_t> expected_data(std::size_t data_bytes) {
  std::vector<uint8_t> data;
  for (std::size_t i = 0; i < data_bytes; ++i) data.push_back(uint8_t(i * 31 % 256));
  return data;
}

TEST_CASE("IDX files of 1 to 4 dimensions read plain and gzipped", "[idx_file]") {
  TempDir dir;
  const bool gzipped = GENERATE(false, true);
  struct Case {
    std::vector<uint32_t> dims;
    std::size_t bytes;
  };
  const std::vector<Case> cases = {
      {{5}, 5}, {{3, 2, 4}, 24}, {{2, 3, 2, 3}, 36}, {{0, 28, 28}, 0}, {{1, 1}, 1}};
  for (const Case& c : cases) {
    const auto bytes = idx_bytes(0x800u | uint32_t(c.dims.size()), c.dims, c.bytes);
    const std::string path =
        gzipped ? write_gzipped(dir, "a" + std::to_string(c.dims.size()) + ".gz", bytes)
                : dir.write("a" + std::to_string(c.dims.size()), bytes);
    const IdxArray any = read_idx_file(path);
    CHECK(any.dims == c.dims);
    CHECK(any.data == expected_data(c.bytes));
    const IdxArray exact = read_idx_file(path, int(c.dims.size()));
    CHECK(exact.dims == c.dims);
    CHECK(exact.data == any.data);
    CHECK(read_idx_bytes(path) == bytes);
  }
}

// The reader reserves what a gzip trailer declares, which for several
// members is the last member's size alone: the content must still arrive
// whole, across several read chunks, as from a plain file of that size.
TEST_CASE("a gzip file of two members and a plain file, each several read chunks, read whole",
          "[idx_file]") {
  TempDir dir;
  const std::vector<uint32_t> dims = {3000, 32, 32};
  const std::size_t data_bytes = 3000 * 32 * 32;
  const auto bytes = idx_bytes(0x803, dims, data_bytes);
  const std::size_t split = bytes.size() - 1000;
  const std::string first = write_gzipped(
      dir, "first.gz", std::vector<uint8_t>(bytes.begin(), bytes.begin() + std::ptrdiff_t(split)));
  const std::string second = write_gzipped(
      dir, "second.gz", std::vector<uint8_t>(bytes.begin() + std::ptrdiff_t(split), bytes.end()));
  std::vector<uint8_t> members = read_file(first);
  const std::vector<uint8_t> tail = read_file(second);
  members.insert(members.end(), tail.begin(), tail.end());
  for (const std::string& path : {dir.write("two.gz", members), dir.write("plain", bytes)}) {
    CAPTURE(path);
    CHECK(read_idx_bytes(path) == bytes);
    const IdxArray array = read_idx_file(path, 3);
    CHECK(array.dims == dims);
    CHECK(array.data == expected_data(data_bytes));
  }
}

TEST_CASE("a required number of dimensions is checked against the magic", "[idx_file]") {
  const auto labels = idx_bytes(0x801, {3}, 3);
  CHECK_THROWS_WITH(
      parse_idx(labels, "some/images", 3),
      Catch::Contains("IDX file some/images") && Catch::Contains("magic number is 2049 (0x801)") &&
          Catch::Contains("expected 2051 (0x803)") && Catch::Contains("3 dimensions"));
  CHECK_THROWS_WITH(parse_idx(idx_bytes(0x803, {1, 1, 1}, 1), "lab", 1),
                    Catch::Contains("magic number is 2051") && Catch::Contains("expected 2049") &&
                        Catch::Contains("1 dimension"));
  CHECK(parse_idx(labels, "x", 1).dims == std::vector<uint32_t>{3});
  CHECK_THROWS_WITH(parse_idx(labels, "x", 256), Catch::Contains("256 dimensions"));
  CHECK_THROWS_WITH(parse_idx(labels, "x", -1), Catch::Contains("-1 dimensions"));
}

TEST_CASE("another magic is refused with its value", "[idx_file]") {
  // A little-endian header, another element type (0x09 signed bytes, 0x0D
  // floats), no dimensions, and a nonzero first byte.
  for (uint32_t magic : {0x03080000u, 0x00000903u, 0x00000D01u, 0x00000800u, 0x01000801u}) {
    CHECK_THROWS_WITH(parse_idx(idx_bytes(magic, {1, 1, 1}, 1), "f"),
                      Catch::Contains("IDX file f") &&
                          Catch::Contains("magic number is " + std::to_string(magic)) &&
                          Catch::Contains("not that of an IDX file of unsigned bytes"));
  }
}

TEST_CASE("a file shorter than its header or its data is refused with the sizes", "[idx_file]") {
  CHECK_THROWS_WITH(parse_idx({0, 0, 8}, "f"),
                    Catch::Contains("is 3 bytes") && Catch::Contains("4-byte magic"));
  CHECK_THROWS_WITH(parse_idx({0, 0, 8, 3, 0, 0}, "img"), Catch::Contains("is 6 bytes") &&
                                                              Catch::Contains("16-byte header") &&
                                                              Catch::Contains("3 dimensions"));
  auto images = idx_bytes(0x803, {3, 2, 2}, 12);
  images.pop_back();
  CHECK_THROWS_WITH(parse_idx(images, "img"),
                    Catch::Contains("img") && Catch::Contains("is 27 bytes") &&
                        Catch::Contains("describes 28 (16 header + 12 data)") &&
                        Catch::Contains("truncated"));
  images.push_back(1);
  images.push_back(2);
  const std::string longer = [&] {
    try {
      parse_idx(images, "img");
    } catch (const herd::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  }();
  CHECK_THAT(longer, Catch::Contains("is 29 bytes") && Catch::Contains("describes 28"));
  CHECK_THAT(longer, !Catch::Contains("truncated"));
}

TEST_CASE("dimensions whose product overflows are refused before any allocation", "[idx_file]") {
  CHECK_THROWS_WITH(parse_idx(idx_bytes(0x803, {0xffffffff, 0xffffffff, 0xffffffff}, 0), "big"),
                    Catch::Contains("big") && Catch::Contains("overflow"));
  // A zero anywhere makes the product 0, however large the others.
  const IdxArray empty = parse_idx(idx_bytes(0x803, {0xffffffff, 0xffffffff, 0}, 0), "e");
  CHECK(empty.data.empty());
}

TEST_CASE("mutated IDX files either parse consistently or throw herd::Error", "[idx_file]") {
  const uint64_t seed = 20261206;
  herd::testing::ByteMutator mutator(seed);
  const std::vector<std::vector<uint8_t>> valid = {idx_bytes(0x803, {3, 2, 4}, 24),
                                                   idx_bytes(0x801, {10}, 10),
                                                   idx_bytes(0x804, {1, 2, 1, 3}, 6)};
  int parsed = 0;
  for (int i = 0; i < 20000; ++i) {
    const std::vector<uint8_t> bytes = mutator.mutate(valid[i % valid.size()]);
    const int dimensions = int(mutator.below(5));
    try {
      const IdxArray array = parse_idx(bytes, "mutant", dimensions);
      // What parsed must be what the header says, and the rest of the file.
      uint64_t product = 1;
      for (uint32_t dim : array.dims) product *= dim;
      INFO("seed " << seed << ", mutant " << i);
      REQUIRE(!array.dims.empty());
      if (dimensions > 0) REQUIRE(array.dims.size() == std::size_t(dimensions));
      REQUIRE(array.data.size() == product);
      REQUIRE(bytes.size() == 4 + 4 * array.dims.size() + product);
      ++parsed;
    } catch (const herd::Error& e) {
      INFO("seed " << seed << ", mutant " << i);
      REQUIRE_THAT(e.what(), Catch::StartsWith("IDX file mutant: "));
    }
  }
  // Some mutants (a changed pixel, a flipped dimension count) still parse.
  CHECK(parsed > 0);
}

TEST_CASE("missing, unreadable and corrupt gzip files name the file", "[idx_file]") {
  TempDir dir;
  const std::string missing = dir.path() + "/nothing.gz";
  CHECK_THROWS_WITH(read_idx_file(missing),
                    Catch::Contains(missing) && Catch::Contains("does not exist"));
  CHECK_THROWS_WITH(read_idx_file(dir.path()),
                    Catch::Contains(dir.path()) && Catch::Contains("is a directory"));

  const std::string gz = write_gzipped(dir, "full.gz", idx_bytes(0x803, {50, 28, 28}, 50 * 784));
  std::vector<uint8_t> compressed = read_file(gz);
  CHECK(read_idx_file(gz, 3).data == expected_data(50 * 784));
  std::vector<uint8_t> cut(compressed.begin(), compressed.begin() + compressed.size() / 2);
  const std::string cut_path = dir.write("cut.gz", cut);
  CHECK_THROWS_WITH(read_idx_file(cut_path), Catch::Contains(cut_path) &&
                                                 Catch::Contains("cannot be read") &&
                                                 Catch::Contains("gzip"));
  // A flipped byte in the deflate stream or the CRC is caught by zlib.
  std::vector<uint8_t> flipped = compressed;
  flipped[flipped.size() - 6] ^= 0xff;
  const std::string flipped_path = dir.write("flipped.gz", flipped);
  CHECK_THROWS_WITH(read_idx_file(flipped_path),
                    Catch::Contains(flipped_path) && Catch::Contains("cannot be read"));
}

TEST_CASE("the installed Fashion-MNIST test labels read (dataset-fashion-mnist)",
          "[idx_file][data]") {
  const std::string path = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  struct stat info;
  if (::stat(path.c_str(), &info) != 0) {
    WARN("skipped: " << path << " is not installed");
    return;
  }
  const IdxArray labels = read_idx_file(path, 1);
  CHECK(labels.dims == std::vector<uint32_t>{10000});
  REQUIRE(labels.data.size() == 10000);
  CHECK(labels.data[0] == 9);  // an ankle boot
  CHECK(labels.data[1] == 2);  // a pullover
}

}  // namespace
}  // namespace herd::data
