// bench_values' inputs of the data-moving collectives (block_value): exact
// and distinct in every dtype within its limit; and the checks herd-bench
// runs on every path's output (count_wrong_block, count_wrong_from), which
// must find a wrong element, a poisoned one and a misplaced block.
#include <algorithm>
#include <cstdint>
#include <set>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "benchmarks/herd_bench/bench_values.h"

namespace herd::bench {
namespace {

constexpr DataType kAllDtypes[] = {DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
                                   DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
                                   DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};

std::vector<unsigned char> buffer_of(DataType dtype, int64_t count) {
  return std::vector<unsigned char>(static_cast<std::size_t>(count) * element_size(dtype));
}

TEST_CASE("block_value is exact and distinct over (source, block, i) within a period") {
  const int ranks = 3;
  for (DataType dtype : kAllDtypes) {
    INFO(to_string(dtype));
    // alltoall's p blocks per rank; 14 is int8's period at 3 ranks (127 / 9).
    const int64_t count = 14;
    std::set<double> seen;
    for (int source = 0; source < ranks; ++source) {
      for (int block = 0; block < ranks; ++block) {
        std::vector<unsigned char> data = buffer_of(dtype, count);
        fill_block(dtype, ranks, ranks, source, block, data.data(), count);
        for (int64_t i = 0; i < count; ++i) {
          const double value = block_value(dtype, ranks, ranks, source, block, i);
          CHECK(load(dtype, data.data(), i) == value);  // stored exactly
          seen.insert(value);
        }
      }
    }
    CHECK(seen.size() == static_cast<std::size_t>(ranks * ranks * count));
  }
}

TEST_CASE("block_value stays within the dtype's exact integers, or throws") {
  // int8 holds 1..127: at 3 ranks and 3 blocks the period is 14, so the
  // largest value is 3 * 3 * 14 = 126, and element 14 starts over.
  CHECK(block_value(DataType::kInt8, 3, 3, 2, 2, 13) == 126);
  CHECK(block_value(DataType::kInt8, 3, 3, 0, 0, 14) ==
        block_value(DataType::kInt8, 3, 3, 0, 0, 0));
  CHECK(block_value(DataType::kBFloat16, 16, 16, 15, 15, 0) == 256);
  CHECK_THROWS_AS(block_value(DataType::kInt8, 12, 12, 0, 0, 0), std::invalid_argument);
  CHECK_THROWS_AS(block_value(DataType::kBFloat16, 17, 16, 0, 0, 0), std::invalid_argument);
  // int16 holds 1..32767: 181 ranks of 181 blocks fit (181^2 = 32761), 182 do not.
  CHECK(block_value(DataType::kInt16, 181, 181, 180, 180, 0) == 32761);
  CHECK_THROWS_AS(block_value(DataType::kInt16, 182, 182, 0, 0, 0), std::invalid_argument);
}

TEST_CASE("count_wrong_block finds a wrong element, a poisoned buffer and a misplaced block") {
  const int ranks = 4;
  const int64_t count = 100;
  for (DataType dtype : kAllDtypes) {
    INFO(to_string(dtype));
    std::vector<unsigned char> data = buffer_of(dtype, count);
    fill_block(dtype, ranks, ranks, 2, 1, data.data(), count);
    CHECK(count_wrong_block(dtype, ranks, ranks, 2, 1, 0, data.data(), count, "test") == 0);
    // Another source, or another destination, differs at every element.
    CHECK(count_wrong_block(dtype, ranks, ranks, 3, 1, 0, data.data(), count, "test") == count);
    CHECK(count_wrong_block(dtype, ranks, ranks, 2, 0, 0, data.data(), count, "test") == count);
    store(dtype, data.data(), 37, block_value(dtype, ranks, ranks, 2, 1, 37) + 1);
    CHECK(count_wrong_block(dtype, ranks, ranks, 2, 1, 0, data.data(), count, "test") == 1);
    std::fill(data.begin(), data.end(), static_cast<unsigned char>(0xFF));  // herd-bench's poison
    CHECK(count_wrong_block(dtype, ranks, ranks, 2, 1, 0, data.data(), count, "test") == count);
  }
}

TEST_CASE("count_wrong_from checks one block of the reduction, at its offset") {
  const int ranks = 3;
  const int64_t block = 11;  // not a multiple of the inputs' period of 8
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
    INFO(to_string(op));
    // Reduce the ranks' inputs here, element by element, for block 2.
    std::vector<unsigned char> data = buffer_of(DataType::kInt32, block);
    for (int64_t i = 0; i < block; ++i) {
      const int64_t global = 2 * block + i;
      double value = input_value(op, 0, global);
      for (int rank = 1; rank < ranks; ++rank) {
        const double x = input_value(op, rank, global);
        switch (op) {
          case ReduceOp::kMin: value = std::min(value, x); break;
          case ReduceOp::kMax: value = std::max(value, x); break;
          case ReduceOp::kProduct: value *= x; break;
          default: value += x;
        }
      }
      store(DataType::kInt32, data.data(), i, value);
    }
    CHECK(count_wrong_from(DataType::kInt32, op, ranks, 2, data.data(), 2 * block, block, "t") ==
          0);
    // Block 1's expected values differ from block 2's somewhere, by i % 8.
    CHECK(count_wrong_from(DataType::kInt32, op, ranks, 2, data.data(), block, block, "t") > 0);
  }
}

}  // namespace
}  // namespace herd::bench
