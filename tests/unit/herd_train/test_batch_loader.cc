// BatchLoader: with 1, 2 and 4 threads, every batch is exactly the one the
// single-threaded loop assembles, handed out in step order; destroying the
// loader part-way through an epoch returns promptly; a worker's error is
// rethrown by next() for its step, after every earlier batch.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd_train/batch_loader.h"
#include "herd_train/idx_dataset.h"

namespace herd_train {
namespace {

// `count` (< 65536) samples of 4x3 pixels; the first two pixels spell the
// sample's number and the others vary with it and their position, so a
// wrong or misplaced sample (or pixel) changes the inputs.
Dataset make_dataset(int64_t count) {
  Dataset data;
  data.count = count;
  data.rows = 4;
  data.cols = 3;
  data.pixels.resize(static_cast<std::size_t>(count * data.features()));
  for (int64_t s = 0; s < count; ++s) {
    uint8_t* pixels = data.pixels.data() + s * data.features();
    pixels[0] = uint8_t(s % 256);
    pixels[1] = uint8_t(s / 256);
    for (int64_t i = 2; i < data.features(); ++i) pixels[i] = uint8_t((s * 7 + i * 31) % 256);
  }
  data.labels.resize(static_cast<std::size_t>(count));
  for (int64_t i = 0; i < count; ++i) data.labels[std::size_t(i)] = uint8_t((i * 7) % kNumClasses);
  return data;
}

std::vector<int64_t> shuffled_indices(int64_t count, uint32_t seed) {
  std::vector<int64_t> indices(static_cast<std::size_t>(count));
  std::iota(indices.begin(), indices.end(), int64_t{0});
  std::shuffle(indices.begin(), indices.end(), std::mt19937(seed));
  return indices;
}

// The batch as the single-threaded loop assembles it: each sample's pixels
// as byte / 255 (rounded once from double, which is the correctly rounded
// float quotient: b / 255 never lies on a float rounding boundary).
void direct_batch(const Dataset& data, const std::vector<int64_t>& indices, int64_t batch_size,
                  int64_t step, std::vector<float>& inputs, std::vector<uint8_t>& labels) {
  inputs.assign(static_cast<std::size_t>(batch_size * data.features()), 0.0f);
  labels.assign(static_cast<std::size_t>(batch_size), 0);
  for (int64_t j = 0; j < batch_size; ++j) {
    const int64_t sample = indices[static_cast<std::size_t>(step * batch_size + j)];
    for (int64_t i = 0; i < data.features(); ++i) {
      inputs[static_cast<std::size_t>(j * data.features() + i)] =
          static_cast<float>(data.image(sample)[i] / 255.0);
    }
    labels[static_cast<std::size_t>(j)] = data.labels[static_cast<std::size_t>(sample)];
  }
}

}  // namespace

TEST_CASE("BatchLoader hands out the directly assembled batches in step order") {
  const Dataset data = make_dataset(257);
  const std::vector<int64_t> indices = shuffled_indices(data.count, 7);
  const int threads = GENERATE(1, 2, 4);
  const int64_t batch_size = GENERATE(1, 3, 32, 64);
  const int64_t max_steps = data.count / batch_size;
  for (int64_t steps : {int64_t{0}, int64_t{1}, int64_t{5}, max_steps}) {
    if (steps > max_steps) continue;
    CAPTURE(threads, batch_size, steps);
    BatchLoader loader(data, indices, batch_size, steps, threads);
    CHECK(loader.steps() == steps);
    CHECK(loader.slots() <= 2 * threads);
    std::vector<float> inputs;
    std::vector<uint8_t> labels;
    for (int64_t step = 0; step < steps; ++step) {
      CAPTURE(step);
      const BatchLoader::Batch& batch = loader.next();
      direct_batch(data, indices, batch_size, step, inputs, labels);
      REQUIRE(batch.step == step);
      REQUIRE(batch.inputs.size() == inputs.size());
      REQUIRE(std::memcmp(batch.inputs.data(), inputs.data(), inputs.size() * sizeof(float)) == 0);
      REQUIRE(batch.labels == labels);
    }
    CHECK_THROWS_AS(loader.next(), herd::Error);
  }
}

TEST_CASE("BatchLoader's destructor returns promptly when the epoch is cut short") {
  const Dataset data = make_dataset(1000);
  const std::vector<int64_t> indices = shuffled_indices(data.count, 3);
  const int threads = GENERATE(1, 2, 4);
  const int64_t consumed = GENERATE(0, 1, 3);
  CAPTURE(threads, consumed);
  const auto start = std::chrono::steady_clock::now();
  for (int repeat = 0; repeat < 20; ++repeat) {
    BatchLoader loader(data, indices, /*batch_size=*/2, /*steps=*/500, threads);
    for (int64_t i = 0; i < consumed; ++i) REQUIRE(loader.next().step == i);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 5.0);
}

TEST_CASE("BatchLoader rethrows a worker's error at its step, after the earlier batches") {
  const Dataset data = make_dataset(64);
  std::vector<int64_t> indices = shuffled_indices(data.count, 11);
  const int64_t batch_size = 4;
  indices[3 * batch_size + 2] = data.count;  // batch 3 has a sample outside the dataset
  const int threads = GENERATE(1, 2, 4);
  CAPTURE(threads);
  BatchLoader loader(data, indices, batch_size, /*steps=*/10, threads);
  for (int64_t step = 0; step < 3; ++step) REQUIRE(loader.next().step == step);
  CHECK_THROWS_WITH(loader.next(), Catch::Contains("batch 3") && Catch::Contains("64"));
  // Still at the failed step: the error again, never a later batch.
  CHECK_THROWS_AS(loader.next(), herd::Error);
}

TEST_CASE("BatchLoader checks its arguments") {
  const Dataset data = make_dataset(10);
  const std::vector<int64_t> indices = shuffled_indices(data.count, 1);
  CHECK_THROWS_AS(BatchLoader(data, indices, 0, 1, 1), herd::Error);
  CHECK_THROWS_AS(BatchLoader(data, indices, 2, -1, 1), herd::Error);
  CHECK_THROWS_AS(BatchLoader(data, indices, 2, 1, 0), herd::Error);
  CHECK_THROWS_WITH(BatchLoader(data, indices, 3, 4, 2), Catch::Contains("need 12 indices"));
  CHECK_NOTHROW(BatchLoader(data, indices, 3, 3, 2));
}

}  // namespace herd_train
