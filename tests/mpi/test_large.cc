// One real allreduce of more than 2^31 elements: uint8, kSum, in place,
// 2^31 + 1000 elements (about 2.1 GB a rank), shaped [8, 268435581] so that
// neither extent but their product passes 2^31. Rank r's element i is
// (r + i) % 3, so the result depends only on i % 3 and is known in closed
// form; every element is checked. Catches 32-bit counts anywhere between
// the API and the wire.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

constexpr int64_t kRows = 8;
constexpr int64_t kColumns = 268435581;
constexpr int64_t kCount = kRows * kColumns;
static_assert(kCount == (int64_t{1} << 31) + 1000, "2^31 + 1000 elements");

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

int main() {
  if (!herd_test::init_herd("test_large")) return 1;
  const int rank = herd::rank();
  const int size = herd::size();
  herd_test::Recorder rec("test_large", rank);

  // expected[i % 3] = sum over ranks r of (r + i) % 3; fits uint8 up to 127 ranks.
  int64_t expected[3] = {0, 0, 0};
  for (int residue = 0; residue < 3; ++residue) {
    for (int r = 0; r < size; ++r) expected[residue] += (r + residue) % 3;
  }

  std::unique_ptr<uint8_t[]> data(new uint8_t[kCount]);
  for (int64_t i = 0, value = rank % 3; i < kCount; ++i, value = value == 2 ? 0 : value + 1) {
    data[i] = static_cast<uint8_t>(value);  // (rank + i) % 3
  }

  const auto start = std::chrono::steady_clock::now();
  const herd::TensorView view{data.get(), herd::DataType::kUInt8, {kRows, kColumns}};
  herd_test::CaseCheck c(rec, "uint8 sum of 2^31+1000 elements");
  try {
    herd::allreduce("large/uint8", view, view, herd::ReduceOp::kSum);
    const double seconds = seconds_since(start);
    if (rank == 0) {
      std::printf("test_large: %lld elements in %.2f s (%.2f GB/s algorithm bandwidth)\n",
                  static_cast<long long>(kCount), seconds, kCount / seconds / 1e9);
    }
    for (int64_t i = 0, residue = 0; i < kCount; ++i, residue = residue == 2 ? 0 : residue + 1) {
      if (data[i] != expected[residue]) {  // residue == i % 3
        c.mismatch(i, std::to_string(expected[residue]), std::to_string(data[i]));
      }
    }
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
  }
  c.done();
  data.reset();
  const int code = rec.finish();
  return herd_test::shutdown_herd(rec) ? code : 1;
}
