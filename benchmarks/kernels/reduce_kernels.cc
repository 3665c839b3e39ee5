// herd-kernel-bench: throughput of the reduction kernels the collectives call
// (ops::make_reduce_fn, sum) on one thread, without any communication.
//
// One benchmark per (dtype, buffer size): reduce_sum/<dtype>/<bytes> runs
// reduce(dst, dst, src, count) over buffers of <bytes> bytes each. The reported
// bytes_per_second counts the buffer once per call (count * element size),
// although the kernel reads dst and src and writes dst: it is the rate at which
// a collective gets a received buffer of n bytes reduced, so
// gamma = 1 / bytes_per_second in the cost model (docs/performance.md,
// benchmarks/cost_model.py). 4 KiB fits in L1, 256 KiB in L2, and 16 MiB
// streams from memory on most machines.
//
// Build: the CMake target herd-kernel-bench, present when Google Benchmark
// (libbenchmark-dev) is found. Run: build/benchmarks/herd-kernel-bench, with
// any of Google Benchmark's flags (--benchmark_filter=float32,
// --benchmark_format=csv, --benchmark_min_time=0.2).
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "herd/types.h"
#include "ops/half.h"
#include "ops/reduce.h"

namespace {

using herd::DataType;

constexpr DataType kDataTypes[] = {DataType::kFloat32, DataType::kFloat64, DataType::kFloat16,
                                   DataType::kBFloat16, DataType::kInt32};
constexpr std::size_t kBufferBytes[] = {std::size_t{4} << 10, std::size_t{256} << 10,
                                        std::size_t{16} << 20};

// Writes `value` as element `index` of a buffer of `dtype`. The values are
// small normal numbers (or small integers), so no kernel takes a slow path
// for zeros, subnormals or infinities however many times dst is summed into.
void set_element(std::vector<unsigned char>& buffer, DataType dtype, std::size_t index,
                 float value) {
  unsigned char* at = buffer.data() + index * herd::element_size(dtype);
  switch (dtype) {
    case DataType::kFloat32: std::memcpy(at, &value, sizeof value); return;
    case DataType::kFloat64: {
      const double wide = value;
      std::memcpy(at, &wide, sizeof wide);
      return;
    }
    case DataType::kFloat16: {
      const uint16_t bits = herd::ops::float_to_float16(value);
      std::memcpy(at, &bits, sizeof bits);
      return;
    }
    case DataType::kBFloat16: {
      const uint16_t bits = herd::ops::float_to_bfloat16(value);
      std::memcpy(at, &bits, sizeof bits);
      return;
    }
    case DataType::kInt32: {
      const int32_t integer = static_cast<int32_t>(value * 8.0f);
      std::memcpy(at, &integer, sizeof integer);
      return;
    }
    default: return;
  }
}

std::vector<unsigned char> make_buffer(DataType dtype, int64_t count, float scale) {
  std::vector<unsigned char> buffer(static_cast<std::size_t>(count) * herd::element_size(dtype));
  for (int64_t i = 0; i < count; ++i) {
    set_element(buffer, dtype, static_cast<std::size_t>(i), scale * static_cast<float>(i % 8 + 1));
  }
  return buffer;
}

// dst grows by src on every call; with src at most 1 (float) or 8 (int32),
// a float16 dst stops growing (its spacing exceeds the addend) before it can
// overflow, and an int32 dst stays far below 2^31 in any run's iteration count.
void reduce_sum(benchmark::State& state, DataType dtype, std::size_t bytes) {
  const int64_t count = static_cast<int64_t>(bytes / herd::element_size(dtype));
  std::vector<unsigned char> dst = make_buffer(dtype, count, 1.0f);
  const std::vector<unsigned char> src = make_buffer(dtype, count, 0.125f);
  const herd::ops::ReduceFn reduce = herd::ops::make_reduce_fn(dtype, herd::ReduceOp::kSum);
  for (auto _ : state) {
    reduce(dst.data(), dst.data(), src.data(), count);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  const int64_t buffer_bytes = count * static_cast<int64_t>(herd::element_size(dtype));
  state.SetBytesProcessed(state.iterations() * buffer_bytes);
  state.counters["elements"] = static_cast<double>(count);
}

void register_benchmarks() {
  for (DataType dtype : kDataTypes) {
    for (std::size_t bytes : kBufferBytes) {
      const std::string name = "reduce_sum/" + herd::to_string(dtype) + "/" + std::to_string(bytes);
      benchmark::RegisterBenchmark(name.c_str(), reduce_sum, dtype, bytes);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  register_benchmarks();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
