// The checkpoint reader against mutated files: 20,000 seeded mutants of a
// valid checkpoint, each written to a file and loaded. Most mutants would
// stop at the checksum, so half of them get their header's CRC-32 (and
// sometimes the payload size) recomputed after the edit, which sends the
// edited sections through the parser. load_checkpoint() either returns a
// checkpoint or throws herd::Error; any other exception fails the test, and
// under ASan and UBSan (scripts/test.sh) so does any overread or undefined
// operation.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/checkpoint.h"
#include "tests/unit/fuzz/byte_mutator.h"
#include "tests/unit/fuzz/mutant_file.h"

namespace herd {
namespace {

constexpr uint64_t kSeed = 0x636b707466757a7a;  // "ckptfuzz"
constexpr int kMutants = 20000;
// The header's fields (include/herd/train/checkpoint.h): magic 8, version 4,
// crc32 4 at byte 12, payload size 8 at byte 16; the payload follows.
constexpr std::size_t kCrcOffset = 12;
constexpr std::size_t kPayloadSizeOffset = 16;
constexpr std::size_t kHeaderSize = 24;

Checkpoint valid_checkpoint() {
  Checkpoint ck;
  ck.parameters = {{"fc1/weight", {0.5f, -1.25f, 3.0f, 0.0f, -0.0f, 1e-40f}},
                   {"fc1/bias", {2.0f}},
                   {"empty", {}}};
  ck.optimizer.step = 7;
  ck.optimizer.buffers = {{"fc1/weight/momentum", {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f}},
                          {"fc1/bias/momentum", {-0.5f}}};
  ck.step = 120;
  ck.epoch = 3;
  ck.position = 3.25;
  ck.seed = 42;
  ck.metadata = {{"model", "mlp 784-128-10"}, {"optimizer", "sgd momentum=0.9"}, {"", ""}};
  return ck;
}

void store_le(std::vector<uint8_t>& bytes, std::size_t at, uint64_t value, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
}

bool same(const Checkpoint& a, const Checkpoint& b) {
  auto same_floats = [](const std::vector<float>& x, const std::vector<float>& y) {
    return x.size() == y.size() && std::equal(x.begin(), x.end(), y.begin(), [](float u, float v) {
             return std::memcmp(&u, &v, sizeof u) == 0;
           });
  };
  if (a.parameters.size() != b.parameters.size() ||
      a.optimizer.buffers.size() != b.optimizer.buffers.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.parameters.size(); ++i) {
    if (a.parameters[i].name != b.parameters[i].name ||
        !same_floats(a.parameters[i].values, b.parameters[i].values)) {
      return false;
    }
  }
  for (std::size_t i = 0; i < a.optimizer.buffers.size(); ++i) {
    if (a.optimizer.buffers[i].name != b.optimizer.buffers[i].name ||
        !same_floats(a.optimizer.buffers[i].values, b.optimizer.buffers[i].values)) {
      return false;
    }
  }
  return a.optimizer.step == b.optimizer.step && a.step == b.step && a.epoch == b.epoch &&
         std::memcmp(&a.position, &b.position, sizeof a.position) == 0 && a.seed == b.seed &&
         a.metadata == b.metadata;
}

}  // namespace

TEST_CASE("checkpoint fuzz: mutated files load or throw herd::Error, nothing else",
          "[checkpoint][fuzz]") {
  testing::MutantFile file("checkpoint");
  save_checkpoint(file.path(), valid_checkpoint());
  const std::vector<uint8_t> valid = file.read();
  REQUIRE(valid.size() > kHeaderSize);
  REQUIRE(same(load_checkpoint(file.path()), valid_checkpoint()));

  testing::ByteMutator mutator(kSeed);
  int loaded = 0;
  int refused_in_sections = 0;
  for (int i = 0; i < kMutants; ++i) {
    std::vector<uint8_t> mutant = mutator.mutate(valid);
    const bool resealed = mutant.size() >= kHeaderSize && mutator.below(2) == 0;
    if (resealed) {
      if (mutator.below(2) == 0) {
        store_le(mutant, kPayloadSizeOffset, mutant.size() - kHeaderSize, 8);
      }
      const uint32_t crc = crc32(mutant.data() + kHeaderSize, mutant.size() - kHeaderSize);
      store_le(mutant, kCrcOffset, crc, 4);
    }
    INFO("seed " << kSeed << ", mutant " << i << " of " << mutant.size() << " bytes"
                 << (resealed ? ", checksum recomputed" : ""));
    file.write(mutant);
    try {
      const Checkpoint ck = load_checkpoint(file.path());
      // Whatever loads saves and loads again to the same checkpoint (the
      // first few only: each save waits for the disk in fsync).
      if (++loaded <= 5) {
        save_checkpoint(file.path(), ck);
        CHECK(same(load_checkpoint(file.path()), ck));
      }
    } catch (const Error& e) {
      const std::string message = e.what();
      CHECK(message.find(file.path()) != std::string::npos);
      if (message.find("section") != std::string::npos ||
          message.find("appears twice") != std::string::npos) {
        ++refused_in_sections;
      }
    }
  }
  // Both outcomes were reached, and so were the sections behind the
  // checksum.
  CHECK(loaded > 0);
  CHECK(loaded < kMutants);
  CHECK(refused_in_sections > kMutants / 10);
}

}  // namespace herd
