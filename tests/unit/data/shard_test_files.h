// Records for the tests of the shards and the prefetcher: payloads that
// cover the framing's cases (empty records, lengths of every residue mod 4,
// aligned magic words that split a record into parts, unaligned ones that do
// not, records longer than a part-header read window), written as a .rec and
// an .idx.
#pragma once

#include <cstdint>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "herd/data/record_index.h"
#include "herd/data/record_shard.h"
#include "herd/data/recordio.h"
#include "tests/unit/test_files.h"

namespace herd::testing {

using Payload = std::vector<uint8_t>;

inline const uint8_t kMagicOnDisk[4] = {0x0a, 0x23, 0xd7, 0xce};

// `count` payloads drawn from `seed`: mostly short ones of random bytes,
// with every few an empty one, one holding the magic word at an aligned
// offset (or two, or at its very end), one holding it unaligned, and now and
// then one of 20 to 90 KiB.
inline std::vector<Payload> varied_payloads(std::size_t count, uint64_t seed) {
  std::mt19937_64 random(seed);
  const auto below = [&](uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n - 1)(random);
  };
  std::vector<Payload> payloads;
  for (std::size_t i = 0; i < count; ++i) {
    Payload payload;
    const uint64_t kind = below(10);
    std::size_t length = 0;
    if (kind == 0) {
      length = 0;
    } else if (kind == 1) {
      length = 20 * 1024 + below(70 * 1024);
    } else {
      length = below(300);
    }
    for (std::size_t b = 0; b < length; ++b) payload.push_back(static_cast<uint8_t>(below(256)));
    const auto put_magic = [&](std::size_t at) {
      if (payload.size() < at + 4) payload.resize(at + 4);
      for (int b = 0; b < 4; ++b) payload[at + b] = kMagicOnDisk[b];
    };
    if (kind == 2) {
      put_magic(4 * below(payload.size() / 4 + 1));
    } else if (kind == 3) {
      put_magic(0);
      put_magic(4 * below(8) + 8);
    } else if (kind == 4) {
      put_magic(4 * below(payload.size() / 4 + 1) + 1 + below(3));
    } else if (kind == 5) {
      put_magic(payload.size() & ~std::size_t{3});
    }
    payloads.push_back(std::move(payload));
  }
  return payloads;
}

// Writes `payloads` to `path` and returns each record's head offset.
inline std::vector<uint64_t> write_records(const std::string& path,
                                           const std::vector<Payload>& payloads) {
  data::RecordWriter writer(path);
  std::vector<uint64_t> offsets;
  for (const Payload& payload : payloads) offsets.push_back(writer.write(payload));
  writer.close();
  return offsets;
}

// Writes "key\toffset" lines, one per entry, in the order given.
inline void write_index_lines(const std::string& path, const std::vector<int64_t>& keys,
                              const std::vector<uint64_t>& offsets) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  for (std::size_t i = 0; i < keys.size(); ++i) out << keys[i] << '\t' << offsets[i] << '\n';
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Every record of the shard, read by index in order.
inline std::vector<Payload> shard_records(const data::RecordShard& shard) {
  std::vector<Payload> records;
  Payload record;
  for (std::size_t i = 0; i < shard.size(); ++i) {
    shard.read(i, &record);
    records.push_back(record);
  }
  return records;
}

}  // namespace herd::testing
