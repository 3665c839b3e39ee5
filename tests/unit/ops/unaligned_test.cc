// The ops on buffers that start at byte offsets their element type is not
// aligned to (a tensor may start at any byte): reductions in both forms,
// scale, divide and fill_identity give exactly the reference results, across
// more than one staging block. Under UBSan (scripts/test.sh) a typed access
// through such a pointer would abort the test.
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "ops/reduce.h"
#include "ops_reference.h"

namespace herd::ops {
namespace {

using testing::Bytes;
using testing::first_mismatch;
using testing::kAllDataTypes;

// More elements than one 8 KiB staging block holds for every element size.
constexpr int64_t kCount = 5000;

// Small integers over 4: exact in every type, and sums and doubled values
// stay in range (uint8 takes 0..100 whole numbers, the others -50..50).
std::vector<double> make_values(DataType dtype, std::mt19937_64& rng) {
  const bool integer = dtype == DataType::kUInt8 || dtype == DataType::kInt8 ||
                       dtype == DataType::kInt16 || dtype == DataType::kInt32 ||
                       dtype == DataType::kInt64;
  std::uniform_int_distribution<int> dist(dtype == DataType::kUInt8 ? 0 : -50,
                                          dtype == DataType::kUInt8 ? 100 : 50);
  std::vector<double> values(kCount);
  for (double& v : values) v = integer ? dist(rng) : dist(rng) / 4.0;
  return values;
}

// A buffer whose data starts `offset` bytes into its storage.
class OffsetBuffer {
 public:
  OffsetBuffer(const Bytes& content, std::size_t offset)
      : storage_(content.size() + offset + 8), offset_(offset), size_(content.size()) {
    std::memcpy(data(), content.data(), size_);
  }
  unsigned char* data() { return storage_.data() + offset_; }
  Bytes content() const {
    return Bytes(storage_.begin() + static_cast<std::ptrdiff_t>(offset_),
                 storage_.begin() + static_cast<std::ptrdiff_t>(offset_ + size_));
  }

 private:
  Bytes storage_;
  std::size_t offset_;
  std::size_t size_;
};

}  // namespace

TEST_CASE("ops work on buffers not aligned to their element type", "[reduce][unaligned]") {
  struct Offsets {
    std::size_t dst, a, b;
  };
  const Offsets offsets[] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 3}, {1, 1, 1}, {3, 5, 7}};
  for (DataType dtype : kAllDataTypes) {
    std::mt19937_64 rng(17);
    const std::vector<double> a = make_values(dtype, rng);
    const std::vector<double> b = make_values(dtype, rng);
    std::vector<double> sum(kCount), max(kCount), doubled(kCount);
    for (std::size_t i = 0; i < a.size(); ++i) {
      sum[i] = a[i] + b[i];
      max[i] = a[i] < b[i] ? b[i] : a[i];
      doubled[i] = 2 * a[i];
    }
    const Bytes a_bytes = testing::to_bytes(a, dtype);
    const Bytes b_bytes = testing::to_bytes(b, dtype);

    for (const Offsets& at : offsets) {
      INFO("dtype " << to_string(dtype) << ", byte offsets dst " << at.dst << ", a " << at.a
                    << ", b " << at.b);
      OffsetBuffer dst(Bytes(a_bytes.size()), at.dst);
      OffsetBuffer x(a_bytes, at.a);
      OffsetBuffer y(b_bytes, at.b);
      make_reduce_fn(dtype, ReduceOp::kSum)(dst.data(), x.data(), y.data(), kCount);
      CHECK(first_mismatch(dst.content(), sum, dtype) == "");
      make_reduce_fn(dtype, ReduceOp::kMax)(dst.data(), x.data(), y.data(), kCount);
      CHECK(first_mismatch(dst.content(), max, dtype) == "");
      CHECK(x.content() == a_bytes);  // operands untouched
      CHECK(y.content() == b_bytes);

      reduce_into(x.data(), y.data(), kCount, dtype, ReduceOp::kSum);
      CHECK(first_mismatch(x.content(), sum, dtype) == "");
    }

    INFO("dtype " << to_string(dtype) << ", one byte past alignment");
    OffsetBuffer buf(a_bytes, 1);
    scale(buf.data(), kCount, dtype, 2.0);
    CHECK(first_mismatch(buf.content(), doubled, dtype) == "");
    divide(buf.data(), kCount, dtype, 2);
    CHECK(first_mismatch(buf.content(), a, dtype) == "");
    fill_identity(buf.data(), kCount, dtype, ReduceOp::kSum);
    CHECK(first_mismatch(buf.content(), std::vector<double>(kCount, 0.0), dtype) == "");
    fill_identity(buf.data(), kCount, dtype, ReduceOp::kProduct);
    CHECK(first_mismatch(buf.content(), std::vector<double>(kCount, 1.0), dtype) == "");
  }
}

}  // namespace herd::ops
