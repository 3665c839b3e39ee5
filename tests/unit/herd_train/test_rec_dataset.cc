// RecDataset and RecBatchLoader against .rec files built here byte by byte
// from the format's description (framing, image header), not by herd's
// writer: each part's records, decoded, are the pixel bytes and labels
// written, in file order, for 1 to 5 parts with and without an .idx; the
// batches of an epoch's order are exactly its records whatever the thread
// count; every bad record is refused naming the file, its offset and the
// values.

#include <cstdint>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd_train/rec_dataset.h"
#include "tests/unit/test_files.h"

namespace herd_train {
namespace {

using herd::testing::TempDir;

void put32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put64(std::vector<uint8_t>& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_float(std::vector<uint8_t>& out, float f) {
  uint32_t bits = 0;
  std::memcpy(&bits, &f, 4);
  put32(out, bits);
}

// An image record's payload: the 24-byte header (flag, label, id, id2), the
// labels when there are several, then the pixels.
std::vector<uint8_t> image_record(float label, uint64_t id, const std::vector<uint8_t>& pixels,
                                  const std::vector<float>& labels = {}) {
  std::vector<uint8_t> out;
  put32(out, static_cast<uint32_t>(labels.size()));
  put_float(out, labels.empty() ? label : 0.0f);
  put64(out, id);
  put64(out, 0);
  for (float l : labels) put_float(out, l);
  out.insert(out.end(), pixels.begin(), pixels.end());
  return out;
}

// One whole record's framing: magic, length (cflag 0), data, zero padding
// to 4 bytes. The payloads here hold no aligned magic word (no byte 0xce),
// so no record is split.
void frame(std::vector<uint8_t>& file, const std::vector<uint8_t>& payload) {
  put32(file, 0xced7230a);
  put32(file, static_cast<uint32_t>(payload.size()));
  file.insert(file.end(), payload.begin(), payload.end());
  while (file.size() % 4 != 0) file.push_back(0);
}

// Sample k's pixel i, and its class: below 0xce, distinct per sample.
uint8_t pixel(int64_t k, int64_t i) { return static_cast<uint8_t>((k * 31 + i * 7) % 200); }
uint8_t label_of(int64_t k) { return static_cast<uint8_t>((k * 3) % 10); }

// `count` records of `features` pixels; `offsets` gets each record's head.
std::vector<uint8_t> rec_file(int64_t count, int64_t features, std::vector<uint64_t>* offsets) {
  std::vector<uint8_t> file;
  for (int64_t k = 0; k < count; ++k) {
    std::vector<uint8_t> pixels;
    for (int64_t i = 0; i < features; ++i) pixels.push_back(pixel(k, i));
    offsets->push_back(file.size());
    frame(file, image_record(label_of(k), static_cast<uint64_t>(k), pixels));
  }
  return file;
}

std::string idx_text(const std::vector<uint64_t>& offsets) {
  std::string text;
  for (std::size_t k = 0; k < offsets.size(); ++k) {
    text += std::to_string(k) + "\t" + std::to_string(offsets[k]) + "\n";
  }
  return text;
}

// The samples of a part, by global record number.
void check_sample(const Dataset& data, int64_t row, int64_t k) {
  INFO("row " << row << " is record " << k);
  REQUIRE(data.labels[static_cast<std::size_t>(row)] == label_of(k));
  for (int64_t i = 0; i < data.features(); ++i) {
    REQUIRE(data.image(row)[i] == pixel(k, i));
  }
}

}  // namespace

TEST_CASE("every part's records decode to their pixel bytes and labels, in file order", "[rec]") {
  TempDir dir;
  std::vector<uint64_t> offsets;
  const int64_t count = 23, features = 12;  // records of 8 + 24 + 12 bytes
  const std::string indexed = dir.write("indexed.rec", rec_file(count, features, &offsets));
  const std::string index = dir.write_text("indexed.idx", idx_text(offsets));
  std::vector<uint64_t> unused;
  const std::string plain = dir.write("plain.rec", rec_file(count, features, &unused));
  for (const std::string& path : {indexed, plain}) {
    for (int parts = 1; parts <= 5; ++parts) {
      INFO(path << ", " << parts << " parts");
      int64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        const RecDataset rec(path, p, parts);
        CHECK(rec.features() == features);
        CHECK(rec.index_path() == (path == indexed ? index : std::string()));
        for (int threads : {1, 3}) {
          const Dataset data = rec.read_part(threads, /*keep=*/true);
          REQUIRE(data.count == rec.count());
          REQUIRE(data.features() == features);
          for (int64_t row = 0; row < data.count; ++row) check_sample(data, row, next + row);
        }
        // The shard's records are those heads, in file order.
        for (int64_t row = 0; row < rec.count(); ++row) {
          CHECK(rec.shard().records()[static_cast<std::size_t>(row)].offset ==
                offsets[static_cast<std::size_t>(next + row)]);
        }
        CHECK(rec.read_part(2, /*keep=*/false).count == 0);
        next += rec.count();
      }
      CHECK(next == count);
    }
  }
}

TEST_CASE("by index, 23 records in 5 parts hold 5, 5, 5, 5, 3", "[rec]") {
  TempDir dir;
  std::vector<uint64_t> offsets;
  const std::string path = dir.write("d.rec", rec_file(23, 4, &offsets));
  dir.write_text("d.idx", idx_text(offsets));
  const std::vector<int64_t> expected = {5, 5, 5, 5, 3};
  for (int p = 0; p < 5; ++p) CHECK(RecDataset(path, p, 5).count() == expected[p]);
}

TEST_CASE("a multi-label record's class is its first label", "[rec]") {
  TempDir dir;
  std::vector<uint8_t> file;
  frame(file, image_record(0, 0, {10, 20, 30, 40}, {7.0f, 2.5f, 99.0f}));
  frame(file, image_record(4, 1, {50, 60, 70, 80}));
  const RecDataset rec(dir.write("m.rec", file), 0, 1);
  const Dataset data = rec.read_part(1, true);
  REQUIRE(data.count == 2);
  CHECK(data.labels == std::vector<uint8_t>{7, 4});
  CHECK(data.pixels == std::vector<uint8_t>{10, 20, 30, 40, 50, 60, 70, 80});
}

TEST_CASE("RecBatchLoader's batches are the order's records, with any thread count", "[rec]") {
  TempDir dir;
  std::vector<uint64_t> offsets;
  const int64_t count = 40, features = 8;
  const std::string path = dir.write("b.rec", rec_file(count, features, &offsets));
  // Part 1 of 2 (byte range): records 20..39.
  const RecDataset rec(path, 1, 2);
  REQUIRE(rec.count() == 20);
  // Positions with repeats (a padded order) and out of file order.
  std::vector<int64_t> order;
  for (int64_t k = 0; k < 27; ++k) order.push_back((k * 7) % 20);
  const int64_t batch = 4, steps = 6;  // 24 of the 27 positions
  for (int threads : {1, 2, 5}) {
    INFO(threads << " threads");
    RecBatchLoader loader(rec, order, batch, steps, threads);
    for (int64_t step = 0; step < steps; ++step) {
      const BatchLoader::Batch& b = loader.next();
      REQUIRE(b.step == step);
      for (int64_t j = 0; j < batch; ++j) {
        const int64_t k = 20 + order[static_cast<std::size_t>(step * batch + j)];
        REQUIRE(b.labels[static_cast<std::size_t>(j)] == label_of(k));
        for (int64_t i = 0; i < features; ++i) {
          // byte / 255 rounded once from double: the correctly rounded float quotient.
          REQUIRE(b.inputs[static_cast<std::size_t>(j * features + i)] ==
                  static_cast<float>(pixel(k, i) / 255.0));
        }
      }
    }
    CHECK_THROWS_WITH(loader.next(), Catch::Contains("after the last of 6 batches"));
  }
  // Destroyed part-way through: the prefetcher's threads are joined.
  for (int i = 0; i < 20; ++i) {
    RecBatchLoader loader(rec, order, batch, steps, 3);
    loader.next();
  }
  CHECK_THROWS_WITH(RecBatchLoader(rec, order, batch, 7, 2),
                    Catch::Contains("7 batches of 4 need 28 positions, got 27"));
  CHECK_THROWS_WITH(RecBatchLoader(rec, {0, 1, 20, 3}, 2, 2, 1),
                    Catch::Contains("position 20 is outside") && Catch::Contains("20 records"));
  CHECK_THROWS_WITH(RecBatchLoader(rec, order, 0, 1, 1), Catch::Contains("batch size"));
  CHECK_THROWS_WITH(RecBatchLoader(rec, order, 1, 1, 0), Catch::Contains("threads"));
}

TEST_CASE("a record of another pixel count is refused with its offset and both sizes", "[rec]") {
  TempDir dir;
  std::vector<uint8_t> file;
  frame(file, image_record(1, 0, std::vector<uint8_t>(16, 3)));
  frame(file, image_record(2, 1, std::vector<uint8_t>(16, 4)));
  const std::size_t bad = file.size();  // 2 * (8 + 40) = 96
  REQUIRE(bad == 96);
  frame(file, image_record(3, 2, std::vector<uint8_t>(12, 5)));
  const std::string path = dir.write("s.rec", file);
  const RecDataset rec(path, 0, 1);
  CHECK(rec.features() == 16);
  CHECK_THROWS_WITH(rec.read_part(2, false), Catch::Contains(path + " at byte 96") &&
                                                 Catch::Contains("holds 12 bytes") &&
                                                 Catch::Contains("first record holds 16"));
  // The batch holding it throws from next(), the earlier one is handed out.
  RecBatchLoader loader(rec, {0, 1, 2, 0}, 2, 2, 2);
  CHECK(loader.next().labels == std::vector<uint8_t>{1, 2});
  CHECK_THROWS_WITH(loader.next(), Catch::Contains(path + " at byte 96"));
}

TEST_CASE("a label that is no class is refused with its offset and value", "[rec]") {
  TempDir dir;
  for (float label : {10.0f, -1.0f, 2.5f}) {
    std::vector<uint8_t> file;
    frame(file, image_record(1, 0, {1, 2, 3, 4}));
    frame(file, image_record(label, 1, {1, 2, 3, 4}));
    const std::string path = dir.write("l.rec", file);
    INFO("label " << label);
    std::ostringstream value;
    value << "label " << label << " is not a class (an integer 0..9)";
    CHECK_THROWS_WITH(RecDataset(path, 0, 1).read_part(1, false),
                      Catch::Contains(path + " at byte 36") && Catch::Contains(value.str()));
  }
}

TEST_CASE("a record shorter than the image header is refused with its offset", "[rec]") {
  TempDir dir;
  std::vector<uint8_t> file;
  frame(file, image_record(1, 0, {1, 2, 3, 4}));
  frame(file, {1, 2, 3, 4, 5, 6, 7, 8});  // 8 bytes: no header
  const std::string path = dir.write("h.rec", file);
  CHECK_THROWS_WITH(RecDataset(path, 0, 1).read_part(1, false),
                    Catch::Contains(path + " at byte 36"));
  // The first record decides the pixel count: it must be an image record.
  std::vector<uint8_t> first;
  frame(first, {1, 2, 3, 4});
  const std::string short_first = dir.write("f.rec", first);
  CHECK_THROWS_WITH(RecDataset(short_first, 0, 1), Catch::Contains(short_first + " at byte 0"));
  std::vector<uint8_t> header_only;
  frame(header_only, image_record(1, 0, {}));
  const std::string empty_image = dir.write("e.rec", header_only);
  CHECK_THROWS_WITH(RecDataset(empty_image, 0, 1), Catch::Contains(empty_image + " at byte 0") &&
                                                       Catch::Contains("holds no pixels"));
}

TEST_CASE("an empty or missing file is refused naming it", "[rec]") {
  TempDir dir;
  const std::string empty = dir.write("empty.rec", {});
  CHECK_THROWS_WITH(RecDataset(empty, 0, 1),
                    Catch::Contains(empty) && Catch::Contains("holds no records"));
  CHECK_THROWS_WITH(RecDataset("/nonexistent/x.rec", 0, 1), Catch::Contains("/nonexistent/x.rec"));
}

TEST_CASE("broken framing in a part is refused with the file and offset", "[rec]") {
  TempDir dir;
  std::vector<uint64_t> offsets;
  std::vector<uint8_t> file = rec_file(6, 4, &offsets);
  // Record 4's magic overwritten: by index, its offset is no record head.
  file[offsets[4]] ^= 0xff;
  const std::string path = dir.write("x.rec", file);
  dir.write_text("x.idx", idx_text(offsets));
  const RecDataset rec(path, 1, 2);  // records 3, 4, 5
  CHECK_THROWS_WITH(rec.read_part(1, false),
                    Catch::Contains(path) && Catch::Contains(std::to_string(offsets[4])));
}

}  // namespace herd_train
