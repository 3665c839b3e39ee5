// The IDX loader: small synthetic files written here (plain and gzipped),
// each way a file can be wrong, and the real Fashion-MNIST test set when the
// Debian package dataset-fashion-mnist is installed.
#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd_train/idx_dataset.h"
#include "tests/unit/gzip_test_file.h"

namespace herd_train {
namespace {

using herd::testing::read_file;
using herd::testing::TempDir;
using herd::testing::write_gzipped;

void put_be32(std::vector<uint8_t>& bytes, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(value >> shift));
}

std::vector<uint8_t> images_file(uint32_t magic, uint32_t count, uint32_t rows, uint32_t cols,
                                 std::size_t pixels) {
  std::vector<uint8_t> bytes;
  put_be32(bytes, magic);
  put_be32(bytes, count);
  put_be32(bytes, rows);
  put_be32(bytes, cols);
  for (std::size_t i = 0; i < pixels; ++i) bytes.push_back(uint8_t(i * 37 % 256));
  return bytes;
}

std::vector<uint8_t> labels_file(uint32_t magic, std::vector<uint8_t> labels) {
  std::vector<uint8_t> bytes;
  put_be32(bytes, magic);
  put_be32(bytes, static_cast<uint32_t>(labels.size()));
  bytes.insert(bytes.end(), labels.begin(), labels.end());
  return bytes;
}

TEST_CASE("valid IDX files load as their pixel bytes with their labels", "[idx]") {
  TempDir dir;
  const bool gzipped = GENERATE(false, true);
  const auto images = images_file(2051, 3, 2, 4, 3 * 2 * 4);
  const auto labels = labels_file(2049, {9, 0, 4});
  const std::string images_path =
      gzipped ? write_gzipped(dir, "images.gz", images) : dir.write("images", images);
  const std::string labels_path =
      gzipped ? write_gzipped(dir, "labels.gz", labels) : dir.write("labels", labels);
  const Dataset data = load_idx(images_path, labels_path);
  CHECK(data.count == 3);
  CHECK(data.rows == 2);
  CHECK(data.cols == 4);
  CHECK(data.features() == 8);
  REQUIRE(data.pixels.size() == 24);
  for (std::size_t i = 0; i < 24; ++i) CHECK(data.pixels[i] == uint8_t(i * 37 % 256));
  CHECK(data.image(2) == data.pixels.data() + 16);
  CHECK(data.labels == std::vector<uint8_t>{9, 0, 4});
}

TEST_CASE("pixels 0 and 255 become exactly 0 and 1", "[idx]") {
  auto bytes = images_file(2051, 1, 1, 2, 0);
  bytes.push_back(0);
  bytes.push_back(255);
  const Dataset data = parse_idx_images(bytes, "x");
  REQUIRE(data.pixels == std::vector<uint8_t>{0, 255});
  std::vector<float> inputs(2, -1.0f);
  pixels_to_inputs(data.image(0), 2, inputs.data());
  CHECK(inputs == std::vector<float>{0.0f, 1.0f});
}

TEST_CASE("every byte becomes its quotient by 255, correctly rounded to float", "[idx]") {
  // b / 255 rounded once from double: b / 255's binary expansion repeats
  // every 8 bits, so it never lies on a float rounding boundary and the
  // double's rounding to float is the correctly rounded float quotient.
  std::vector<uint8_t> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[std::size_t(b)] = uint8_t(b);
  std::vector<float> inputs(256, -1.0f);
  pixels_to_inputs(bytes.data(), 256, inputs.data());
  for (int b = 0; b < 256; ++b) {
    CAPTURE(b);
    CHECK(inputs[std::size_t(b)] == static_cast<float>(b / 255.0));
  }
  // A count of 0 writes nothing.
  pixels_to_inputs(bytes.data(), 0, inputs.data() + 1);
  CHECK(inputs[1] == static_cast<float>(1 / 255.0));
}

TEST_CASE("a wrong magic number names the file and both numbers", "[idx]") {
  CHECK_THROWS_WITH(parse_idx_images(images_file(2049, 1, 2, 2, 4), "some/images"),
                    Catch::Contains("some/images") && Catch::Contains("magic number is 2049") &&
                        Catch::Contains("expected 2051"));
  CHECK_THROWS_WITH(parse_idx_labels(labels_file(2051, {1}), "some/labels"),
                    Catch::Contains("some/labels") && Catch::Contains("magic number is 2051") &&
                        Catch::Contains("expected 2049"));
  // A little-endian header reads as a different, wrong magic.
  CHECK_THROWS_WITH(parse_idx_labels(labels_file(0x01080000, {1}), "le"),
                    Catch::Contains("magic number is 17301504"));
}

TEST_CASE("a truncated or oversized file is refused with its sizes", "[idx]") {
  TempDir dir;
  auto images = images_file(2051, 3, 2, 2, 3 * 4);
  images.pop_back();
  CHECK_THROWS_WITH(parse_idx_images(images, "img"),
                    Catch::Contains("img") && Catch::Contains("is 27 bytes") &&
                        Catch::Contains("describes 28") && Catch::Contains("truncated"));
  images.push_back(1);
  images.push_back(2);
  CHECK_THROWS_WITH(parse_idx_images(images, "img"),
                    Catch::Contains("is 29 bytes") && Catch::Contains("describes 28"));
  CHECK_THROWS_WITH(parse_idx_images({0, 0, 8, 3, 0, 0}, "img"),
                    Catch::Contains("is 6 bytes") && Catch::Contains("16-byte header"));
  auto labels = labels_file(2049, {1, 2, 3});
  labels.pop_back();
  CHECK_THROWS_WITH(parse_idx_labels(labels, "lab"),
                    Catch::Contains("lab") && Catch::Contains("truncated"));

  // A gzip stream cut short is an error, not a short file read silently.
  const std::string gz = write_gzipped(dir, "full.gz", images_file(2051, 50, 28, 28, 50 * 784));
  std::vector<uint8_t> compressed = read_file(gz);
  compressed.resize(compressed.size() / 2);
  const std::string cut = dir.write("cut.gz", compressed);
  CHECK_THROWS_WITH(read_maybe_gzipped(cut),
                    Catch::Contains(cut) && Catch::Contains("cannot be read"));
}

TEST_CASE("zero rows or columns are refused", "[idx]") {
  CHECK_THROWS_WITH(parse_idx_images(images_file(2051, 1, 0, 5, 0), "img"), Catch::Contains("0x5"));
}

TEST_CASE("images and labels must agree in count", "[idx]") {
  TempDir dir;
  const std::string images = dir.write("images", images_file(2051, 3, 2, 2, 12));
  const std::string labels = dir.write("labels", labels_file(2049, {1, 2}));
  CHECK_THROWS_WITH(load_idx(images, labels), Catch::Contains("3 images") &&
                                                  Catch::Contains("2 labels") &&
                                                  Catch::Contains(images));
}

TEST_CASE("a label outside 0..9 is refused with its index", "[idx]") {
  CHECK_THROWS_WITH(
      parse_idx_labels(labels_file(2049, {0, 9, 10, 3}), "lab"),
      Catch::Contains("lab") && Catch::Contains("label 2 is 10") && Catch::Contains("0..9"));
  CHECK_NOTHROW(parse_idx_labels(labels_file(2049, {0, 9}), "lab"));
}

TEST_CASE("a missing file or directory names it and the Debian package", "[idx]") {
  TempDir dir;
  const std::string missing = dir.path() + "/t10k-images-idx3-ubyte.gz";
  CHECK_THROWS_WITH(read_maybe_gzipped(missing),
                    Catch::Contains(missing) && Catch::Contains("does not exist") &&
                        Catch::Contains("apt-get install dataset-fashion-mnist"));
  CHECK_THROWS_WITH(find_fashion_mnist_dir(dir.path() + "/nowhere"),
                    Catch::Contains(dir.path() + "/nowhere") &&
                        Catch::Contains("apt-get install dataset-fashion-mnist"));
  // A directory with only some of the four files names the first missing one.
  dir.write("train-images-idx3-ubyte", images_file(2051, 1, 28, 28, 784));
  write_gzipped(dir, "train-labels-idx1-ubyte.gz", labels_file(2049, {1}));
  CHECK_THROWS_WITH(find_fashion_mnist_dir(dir.path()),
                    Catch::Contains("no t10k-images-idx3-ubyte") &&
                        Catch::Contains("apt-get install dataset-fashion-mnist"));
  dir.write("t10k-images-idx3-ubyte", images_file(2051, 2, 28, 28, 2 * 784));
  write_gzipped(dir, "t10k-labels-idx1-ubyte.gz", labels_file(2049, {7, 3}));
  CHECK(find_fashion_mnist_dir(dir.path()) == dir.path());
  // Plain and gzipped names mix: each file is found under either.
  const Dataset test = load_fashion_mnist(dir.path(), Split::kTest);
  CHECK(test.count == 2);
  CHECK(test.labels == std::vector<uint8_t>{7, 3});
  CHECK(load_fashion_mnist(dir.path(), Split::kTrain).count == 1);
}

TEST_CASE("Fashion-MNIST's images must be 28x28", "[idx]") {
  TempDir dir;
  dir.write("t10k-images-idx3-ubyte", images_file(2051, 1, 27, 28, 27 * 28));
  dir.write("t10k-labels-idx1-ubyte", labels_file(2049, {1}));
  CHECK_THROWS_WITH(load_fashion_mnist(dir.path(), Split::kTest),
                    Catch::Contains("27x28") && Catch::Contains("28x28"));
}

TEST_CASE("the installed Fashion-MNIST test set loads (dataset-fashion-mnist)", "[idx][data]") {
  std::string dir;
  try {
    dir = find_fashion_mnist_dir();
  } catch (const herd::Error& e) {
    WARN("skipped: Fashion-MNIST is not installed (" << e.what() << ")");
    return;
  }
  const Dataset test = load_fashion_mnist(dir, Split::kTest);
  CHECK(test.count == 10000);
  CHECK(test.rows == 28);
  CHECK(test.cols == 28);
  REQUIRE(test.labels.size() == 10000);
  REQUIRE(test.pixels.size() == 10000u * 784u);
  CHECK(test.labels[0] == 9);  // an ankle boot
  CHECK(test.labels[1] == 2);  // a pullover
  std::array<int, kNumClasses> per_class{};
  for (uint8_t label : test.labels) ++per_class[label];
  for (int c = 0; c < kNumClasses; ++c) CHECK(per_class[c] == 1000);
  const auto [low, high] = std::minmax_element(test.pixels.begin(), test.pixels.end());
  CHECK(int{*low} == 0);
  CHECK(int{*high} == 255);
}

}  // namespace
}  // namespace herd_train
