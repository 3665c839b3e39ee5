// Seeded random mutations of valid encodings, for the decoders' fuzz tests.
//
// Each mutant is one valid encoding changed by one to four edits: bit flips,
// bytes set to boundary values, 4- or 8-byte little-endian integers written
// over the bytes (where length and count fields live), truncation, extension
// with random bytes, a range deleted or repeated, or all bytes replaced by
// random ones of a random length. The edits are drawn from one std::mt19937_64
// seeded by the test, so a failing run repeats exactly: the test names the
// seed and the mutant's index.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace herd::testing {

class ByteMutator {
 public:
  explicit ByteMutator(uint64_t seed) : random_(seed) {}

  std::vector<uint8_t> mutate(const std::vector<uint8_t>& valid) {
    std::vector<uint8_t> bytes = valid;
    const int edits = static_cast<int>(below(4)) + 1;
    for (int i = 0; i < edits; ++i) edit(bytes);
    return bytes;
  }

  // A number in [0, n); n > 0.
  uint64_t below(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(random_); }

 private:
  // Values at the edges of the ranges decoders check: zero, one, the
  // largest and smallest of each width, and small lengths near a message's
  // own size.
  uint64_t boundary_value(std::size_t size) {
    const uint64_t values[] = {0,
                               1,
                               2,
                               4,
                               7,
                               8,
                               0x7f,
                               0x80,
                               0xff,
                               0x7fff,
                               0xffff,
                               0x7fffffff,
                               0x80000000,
                               0xffffffff,
                               0x100000000,
                               0x7fffffffffffffff,
                               0x8000000000000000,
                               0xffffffffffffffff,
                               static_cast<uint64_t>(size),
                               static_cast<uint64_t>(size) + 1,
                               static_cast<uint64_t>(size) / 2};
    return values[below(sizeof values / sizeof values[0])];
  }

  void write_le(std::vector<uint8_t>& bytes, std::size_t at, uint64_t value, std::size_t width) {
    for (std::size_t i = 0; i < width && at + i < bytes.size(); ++i) {
      bytes[at + i] = static_cast<uint8_t>(value >> (8 * i));
    }
  }

  void edit(std::vector<uint8_t>& bytes) {
    const std::size_t size = bytes.size();
    // Whole random replacements are the rarest: they rarely get past a
    // header, while edits of a valid encoding reach the fields behind it.
    switch (below(16)) {
      case 0:
      case 1:  // flip one to eight bits
        if (size == 0) return;
        for (uint64_t n = below(8) + 1; n > 0; --n) {
          bytes[below(size)] ^= static_cast<uint8_t>(1u << below(8));
        }
        return;
      case 2:
      case 3:  // one byte set to a boundary value
        if (size == 0) return;
        bytes[below(size)] = static_cast<uint8_t>(boundary_value(size));
        return;
      case 4:
      case 5:
      case 6:  // a 4- or 8-byte integer written over the bytes
        if (size == 0) return;
        write_le(bytes, below(size), boundary_value(size), below(2) == 0 ? 4 : 8);
        return;
      case 7:
      case 8:  // truncated
        bytes.resize(below(size + 1));
        return;
      case 9:
      case 10: {  // extended with random bytes
        const std::size_t extra = below(64) + 1;
        for (std::size_t i = 0; i < extra; ++i) bytes.push_back(static_cast<uint8_t>(below(256)));
        return;
      }
      case 11:
      case 12: {  // a range deleted
        if (size == 0) return;
        const std::size_t at = below(size);
        const std::size_t length = below(std::min<std::size_t>(size - at, 32)) + 1;
        bytes.erase(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                    bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
        return;
      }
      case 13:
      case 14: {  // a range repeated in place
        if (size == 0) return;
        const std::size_t at = below(size);
        const std::size_t length = below(std::min<std::size_t>(size - at, 32)) + 1;
        const std::vector<uint8_t> copy(bytes.begin() + static_cast<std::ptrdiff_t>(at),
                                        bytes.begin() + static_cast<std::ptrdiff_t>(at + length));
        bytes.insert(bytes.begin() + static_cast<std::ptrdiff_t>(at), copy.begin(), copy.end());
        return;
      }
      default: {  // random bytes of a random length
        bytes.resize(below(2 * size + 2));
        for (uint8_t& byte : bytes) byte = static_cast<uint8_t>(below(256));
        return;
      }
    }
  }

  std::mt19937_64 random_;
};

}  // namespace herd::testing
