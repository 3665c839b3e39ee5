// ops/cuda/device_kernels.h against the CPU functions of ops/: the same
// seeded random input goes through both, and the results must agree byte for
// byte (a NaN may differ in payload and sign only: GPU arithmetic returns the
// canonical NaN; see the header). Every dtype, sizes {0, 1, 7, 1000, 2^20+3},
// several factors, divisors and ops; the batched copy against memcpy, with
// the bytes around every destination checked untouched.
//
// Runs only where a CUDA device is visible (gpu_test_main.cc exits 77,
// "skipped", elsewhere).
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include "ops/cuda/device_kernels.h"
#include "ops/half.h"
#include "ops/reduce.h"

namespace herd::ops {
namespace {

using Bytes = std::vector<unsigned char>;

constexpr DataType kAllDataTypes[] = {
    DataType::kUInt8,    DataType::kInt8,    DataType::kInt16,
    DataType::kInt32,    DataType::kInt64,   DataType::kFloat16,
    DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64,
};
constexpr ReduceOp kAllReduceOps[] = {
    ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct,
};
constexpr int64_t kSizes[] = {0, 1, 7, 1000, (int64_t{1} << 20) + 3};

// Stops the test case with the call's text and CUDA's message.
#define HERD_REQUIRE_CUDA(call)                                                                    \
  do {                                                                                             \
    const cudaError_t test_error_ = (call);                                                        \
    INFO(#call << ": " << cudaGetErrorName(test_error_) << " (" << cudaGetErrorString(test_error_) \
               << ")");                                                                            \
    REQUIRE(test_error_ == cudaSuccess);                                                           \
  } while (0)

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    HERD_REQUIRE_CUDA(cudaMalloc(&data_, std::max<std::size_t>(bytes, 1)));
  }
  ~DeviceBuffer() { (void)cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  unsigned char* bytes() const { return static_cast<unsigned char*>(data_); }

  // cudaMemcpy from pageable memory may return before its last DMA lands,
  // and kernels on a non-blocking stream do not wait for the legacy stream
  // it ran on: without the synchronize, such a DMA can overwrite a kernel's
  // result (seen on an H200 at 2^20 + 3 elements).
  void upload(const Bytes& host) {
    REQUIRE(host.size() == bytes_);
    HERD_REQUIRE_CUDA(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice));
    HERD_REQUIRE_CUDA(cudaDeviceSynchronize());
  }
  Bytes download() const {
    Bytes host(bytes_);
    HERD_REQUIRE_CUDA(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_;
};

// A stream of its own, so that the kernels are shown to run on the stream
// they are given rather than the default one.
class Stream {
 public:
  Stream() { HERD_REQUIRE_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() { (void)cudaStreamDestroy(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const { HERD_REQUIRE_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

bool is_floating(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

template <typename T>
T load(const Bytes& bytes, std::size_t index) {
  T value;
  std::memcpy(&value, bytes.data() + index * sizeof(T), sizeof(T));
  return value;
}

template <typename T>
void store(Bytes& bytes, std::size_t index, T value) {
  std::memcpy(bytes.data() + index * sizeof(T), &value, sizeof(T));
}

// Element `index` as a double (int64 values beyond 2^53 print rounded; the
// hex bits next to it are exact).
double value_at(const Bytes& bytes, std::size_t index, DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return load<uint8_t>(bytes, index);
    case DataType::kInt8: return load<int8_t>(bytes, index);
    case DataType::kInt16: return load<int16_t>(bytes, index);
    case DataType::kInt32: return load<int32_t>(bytes, index);
    case DataType::kInt64: return static_cast<double>(load<int64_t>(bytes, index));
    case DataType::kFloat16: return float16_to_float(load<uint16_t>(bytes, index));
    case DataType::kBFloat16: return bfloat16_to_float(load<uint16_t>(bytes, index));
    case DataType::kFloat32: return load<float>(bytes, index);
    case DataType::kFloat64: return load<double>(bytes, index);
  }
  return 0;
}

std::string describe(const Bytes& bytes, std::size_t index, DataType dtype) {
  const std::size_t size = element_size(dtype);
  uint64_t bits = 0;
  std::memcpy(&bits, bytes.data() + index * size, size);  // little-endian hosts
  return fmt::format("{} (0x{:0{}x})", value_at(bytes, index, dtype), bits, 2 * size);
}

// How a NaN must match: any NaN (after GPU arithmetic, which returns the
// canonical NaN), or bit for bit (after pure bit manipulation).
enum class NaNs { kAnyPayload, kExactBits };

// "" when `actual` equals `expected` element for element; otherwise how many
// elements differ and the first of them.
std::string first_difference(const Bytes& expected, const Bytes& actual, DataType dtype,
                             NaNs nans) {
  if (expected.size() != actual.size()) {
    return fmt::format("sizes differ: expected {} bytes, actual {}", expected.size(),
                       actual.size());
  }
  const std::size_t size = element_size(dtype);
  const std::size_t count = expected.size() / size;
  std::size_t wrong = 0;
  std::string first;
  for (std::size_t i = 0; i < count; ++i) {
    if (std::memcmp(expected.data() + i * size, actual.data() + i * size, size) == 0) continue;
    if (nans == NaNs::kAnyPayload && is_floating(dtype) &&
        std::isnan(value_at(expected, i, dtype)) && std::isnan(value_at(actual, i, dtype))) {
      continue;
    }
    if (wrong++ == 0) {
      first = fmt::format("index {}: expected {}, actual {}", i, describe(expected, i, dtype),
                          describe(actual, i, dtype));
    }
  }
  if (wrong == 0) return "";
  return fmt::format("{} of {} {} elements differ; first at {}", wrong, count, to_string(dtype),
                     first);
}

// `count` elements of `dtype`: a quarter raw random bits (every NaN, infinity,
// subnormal and extreme is possible), the rest values of the sizes training
// sees, of both signs, spread over many binades.
Bytes random_elements(DataType dtype, int64_t count, std::mt19937_64& rng) {
  const std::size_t size = element_size(dtype);
  Bytes bytes(static_cast<std::size_t>(count) * size);
  std::uniform_real_distribution<double> unit(-1.0, 1.0);
  std::uniform_int_distribution<int> binade(-30, 20);
  std::uniform_int_distribution<int64_t> small(-1000, 1000);
  for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
    if (rng() % 4 == 0) {
      const uint64_t bits = rng();
      std::memcpy(bytes.data() + i * size, &bits, size);
      continue;
    }
    const double real = std::ldexp(unit(rng), binade(rng));
    const int64_t integer = small(rng);
    switch (dtype) {
      case DataType::kUInt8: store(bytes, i, static_cast<uint8_t>(integer & 0xff)); break;
      case DataType::kInt8: store(bytes, i, static_cast<int8_t>(integer % 128)); break;
      case DataType::kInt16: store(bytes, i, static_cast<int16_t>(integer)); break;
      case DataType::kInt32: store(bytes, i, static_cast<int32_t>(integer)); break;
      case DataType::kInt64: store(bytes, i, integer); break;
      case DataType::kFloat16: store(bytes, i, float_to_float16(static_cast<float>(real))); break;
      case DataType::kBFloat16: store(bytes, i, float_to_bfloat16(static_cast<float>(real))); break;
      case DataType::kFloat32: store(bytes, i, static_cast<float>(real)); break;
      case DataType::kFloat64: store(bytes, i, real); break;
    }
  }
  return bytes;
}

// A seed per case, so that a failure reproduces alone.
uint64_t seed_of(DataType dtype, int64_t count, int variant) {
  return 0x9e3779b97f4a7c15ull ^ (static_cast<uint64_t>(dtype) << 48) ^
         (static_cast<uint64_t>(count) << 8) ^ static_cast<uint64_t>(variant);
}

// Runs `gpu(device_pointer, stream)` on a device copy of `input` and returns
// the device buffer's bytes afterwards.
template <typename GpuCall>
Bytes run_on_gpu(const Bytes& input, const Stream& stream, GpuCall&& gpu) {
  DeviceBuffer buffer(input.size());
  buffer.upload(input);
  const Status status = gpu(buffer.data(), stream.get());
  INFO(status.message());
  REQUIRE(status.is_ok());
  stream.synchronize();
  return buffer.download();
}

TEST_CASE("scale equals ops::scale for every dtype", "[gpu][scale]") {
  Stream stream;
  const double kFactors[] = {0.5, -1.5, 1.0 / 3.0, 2.0, 1e-3,
                             3e9, -0.0, 0.0,       1.0, std::numeric_limits<double>::quiet_NaN()};
  for (DataType dtype : kAllDataTypes) {
    for (int64_t count : kSizes) {
      std::mt19937_64 rng(seed_of(dtype, count, 0));
      const Bytes input = random_elements(dtype, count, rng);
      for (double factor : kFactors) {
        Bytes expected = input;
        scale(expected.data(), count, dtype, factor);
        const Bytes actual = run_on_gpu(input, stream, [&](void* data, cudaStream_t s) {
          return cuda::scale(data, count, dtype, factor, s);
        });
        INFO(fmt::format("scale: dtype {}, count {}, factor {}", to_string(dtype), count, factor));
        CHECK(first_difference(expected, actual, dtype, NaNs::kAnyPayload) == "");
      }
    }
  }
}

TEST_CASE("divide equals ops::divide for every dtype", "[gpu][divide]") {
  Stream stream;
  // 2^31 and 2^40 + 1 take the 64-bit division for every integer type;
  // the others the 32-bit one for types up to int32.
  const int64_t kDivisors[] = {1, 2, 3, 7, 64, 1000, int64_t{1} << 31, (int64_t{1} << 40) + 1};
  for (DataType dtype : kAllDataTypes) {
    for (int64_t count : kSizes) {
      std::mt19937_64 rng(seed_of(dtype, count, 1));
      const Bytes input = random_elements(dtype, count, rng);
      for (int64_t divisor : kDivisors) {
        Bytes expected = input;
        divide(expected.data(), count, dtype, divisor);
        const Bytes actual = run_on_gpu(input, stream, [&](void* data, cudaStream_t s) {
          return cuda::divide(data, count, dtype, divisor, s);
        });
        INFO(fmt::format("divide: dtype {}, count {}, divisor {}", to_string(dtype), count,
                         divisor));
        CHECK(first_difference(expected, actual, dtype, NaNs::kAnyPayload) == "");
      }
    }
  }
}

TEST_CASE("average equals ops::average for every dtype", "[gpu][average]") {
  Stream stream;
  // 49: 1/49 in double times 49 is below 1, where only the exact integer
  // division gives whole quotients; postscale 1 divides, the others scale.
  const int64_t kRanks[] = {1, 2, 3, 49};
  const double kPostscales[] = {1.0, 3.0, 0.5, -2.0};
  for (DataType dtype : kAllDataTypes) {
    for (int64_t count : kSizes) {
      std::mt19937_64 rng(seed_of(dtype, count, 2));
      const Bytes input = random_elements(dtype, count, rng);
      for (int64_t ranks : kRanks) {
        for (double postscale : kPostscales) {
          Bytes expected = input;
          average(expected.data(), count, dtype, ranks, postscale);
          const Bytes actual = run_on_gpu(input, stream, [&](void* data, cudaStream_t s) {
            return cuda::average(data, count, dtype, ranks, postscale, s);
          });
          INFO(fmt::format("average: dtype {}, count {}, ranks {}, postscale {}", to_string(dtype),
                           count, ranks, postscale));
          CHECK(first_difference(expected, actual, dtype, NaNs::kAnyPayload) == "");
        }
      }
    }
  }
}
TEST_CASE("fill_identity equals ops::fill_identity for every dtype and op", "[gpu][identity]") {
  Stream stream;
  for (DataType dtype : kAllDataTypes) {
    for (int64_t count : kSizes) {
      std::mt19937_64 rng(seed_of(dtype, count, 2));
      // Garbage to overwrite, so that an element left unwritten shows.
      const Bytes input = random_elements(dtype, count, rng);
      for (ReduceOp op : kAllReduceOps) {
        Bytes expected = input;
        fill_identity(expected.data(), count, dtype, op);
        const Bytes actual = run_on_gpu(input, stream, [&](void* data, cudaStream_t s) {
          return cuda::fill_identity(data, count, dtype, op, s);
        });
        INFO(fmt::format("fill_identity: dtype {}, count {}, op {}", to_string(dtype), count,
                         to_string(op)));
        CHECK(first_difference(expected, actual, dtype, NaNs::kExactBits) == "");
      }
    }
  }
}

// float32 values that stress the float16 rounding: random bits, and values
// in and around float16's range (subnormals, the overflow edge) whose bits
// below a random position are cut to an exact tie, just below or above it.
Bytes float16_stress_inputs(int64_t count, std::mt19937_64& rng) {
  Bytes bytes(static_cast<std::size_t>(count) * sizeof(float));
  std::uniform_int_distribution<uint32_t> exponent(96, 146);  // 2^-31 .. 2^19
  std::uniform_int_distribution<uint32_t> position(13, 23);
  for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    if (rng() % 4 != 0) {
      bits = (bits & 0x807fffffu) | (exponent(rng) << 23);
      const uint32_t k = position(rng);
      switch (rng() % 4) {
        case 0: bits = (bits & ~((1u << k) - 1)) | (1u << (k - 1)); break;        // tie
        case 1: bits = (bits & ~((1u << k) - 1)) | ((1u << (k - 1)) - 1); break;  // below
        case 2: bits = (bits & ~((1u << k) - 1)) | ((1u << (k - 1)) + 1); break;  // above
        default: break;
      }
    }
    std::memcpy(bytes.data() + i * sizeof(float), &bits, sizeof(bits));
  }
  return bytes;
}

TEST_CASE("float_to_float16 equals ops::float_to_float16", "[gpu][half]") {
  Stream stream;
  for (int64_t count : kSizes) {
    std::mt19937_64 rng(seed_of(DataType::kFloat32, count, 3));
    const Bytes input = float16_stress_inputs(count, rng);
    Bytes expected(static_cast<std::size_t>(count) * sizeof(uint16_t));
    float_to_float16(reinterpret_cast<const float*>(input.data()),
                     reinterpret_cast<uint16_t*>(expected.data()), count);

    DeviceBuffer device_input(input.size());
    DeviceBuffer device_output(expected.size());
    device_input.upload(input);
    const Status status =
        cuda::float_to_float16(static_cast<const float*>(device_input.data()),
                               static_cast<uint16_t*>(device_output.data()), count, stream.get());
    INFO(status.message());
    REQUIRE(status.is_ok());
    stream.synchronize();
    INFO(fmt::format("float_to_float16: count {}", count));
    // Pure bit manipulation on both sides: NaNs must match bit for bit too.
    CHECK(first_difference(expected, device_output.download(), DataType::kFloat16,
                           NaNs::kExactBits) == "");
  }
}

TEST_CASE("float16_to_float equals ops::float16_to_float", "[gpu][half]") {
  Stream stream;
  std::vector<int64_t> counts(std::begin(kSizes), std::end(kSizes));
  counts.push_back(65536);  // every pattern once, below
  for (int64_t count : counts) {
    std::mt19937_64 rng(seed_of(DataType::kFloat16, count, 4));
    Bytes input(static_cast<std::size_t>(count) * sizeof(uint16_t));
    for (std::size_t i = 0; i < static_cast<std::size_t>(count); ++i) {
      store(input, i, static_cast<uint16_t>(count == 65536 ? i : rng()));
    }
    Bytes expected(static_cast<std::size_t>(count) * sizeof(float));
    float16_to_float(reinterpret_cast<const uint16_t*>(input.data()),
                     reinterpret_cast<float*>(expected.data()), count);

    DeviceBuffer device_input(input.size());
    DeviceBuffer device_output(expected.size());
    device_input.upload(input);
    const Status status =
        cuda::float16_to_float(static_cast<const uint16_t*>(device_input.data()),
                               static_cast<float*>(device_output.data()), count, stream.get());
    INFO(status.message());
    REQUIRE(status.is_ok());
    stream.synchronize();
    INFO(fmt::format("float16_to_float: count {}", count));
    CHECK(first_difference(expected, device_output.download(), DataType::kFloat32,
                           NaNs::kExactBits) == "");
  }
}

// One copy of the batched_copy test: where it reads and writes, in offsets
// from the two device buffers' starts (which cudaMalloc aligns to 256).
struct PlannedCopy {
  std::size_t source_offset;
  std::size_t destination_offset;
  std::size_t bytes;
};

// `tasks` copies of mixed sizes (0 if `with_empty`, odd and small, tens of
// KiB, and 2^20 + 3) and alignments: some with both ends 16-byte aligned and
// a multiple of 16 bytes (vectors only), most at a random destination offset
// with a source agreeing with it modulo 16, 8, 4, 2 or only 1 (head bytes,
// words, tail bytes), some at unrelated offsets. Destinations are
// disjoint with gaps between them, so that a write outside shows.
std::vector<PlannedCopy> plan_copies(int tasks, bool with_empty, std::size_t source_bytes,
                                     std::mt19937_64& rng) {
  std::vector<PlannedCopy> plan;
  std::size_t next_destination = 1 + rng() % 40;
  for (int t = 0; t < tasks; ++t) {
    std::size_t bytes;
    switch (rng() % 8) {
      case 0: bytes = with_empty ? 0 : 1 + rng() % 64; break;
      case 1: bytes = 1 + rng() % 15; break;
      case 2:
      case 3: bytes = 1 + 2 * (rng() % 300); break;
      case 4:
      case 5: bytes = 16 + rng() % 40000; break;
      case 6: bytes = rng() % 100 == 0 ? (std::size_t{1} << 20) + 3 : 17 + rng() % 3000; break;
      default: bytes = 16 * (1 + rng() % 500); break;
    }
    // One large task per plan, which sizes the grid of its launch.
    if (t == tasks / 2) bytes = (std::size_t{1} << 20) + 3;
    std::size_t source_offset = rng() % (source_bytes - bytes - 32);
    std::size_t destination_offset = next_destination;
    // A source offset of destination offset + shift (mod 16) makes the two
    // agree modulo `shift` and no further (modulo 16 for a shift of 0): it
    // picks the word the copy can use.
    constexpr std::size_t kShifts[] = {0, 8, 4, 2, 1};
    switch (t % 7) {
      case 0:
        bytes = (bytes + 15) / 16 * 16;
        source_offset = source_offset / 16 * 16;
        destination_offset = (destination_offset + 15) / 16 * 16;
        break;
      case 6: break;
      default:
        source_offset = source_offset / 16 * 16 + (destination_offset + kShifts[t % 7 - 1]) % 16;
        break;
    }
    plan.push_back({source_offset, destination_offset, bytes});
    next_destination = destination_offset + bytes + rng() % 40;
  }
  return plan;
}

// Which planned destination `offset` falls in, for the failure message.
std::string owner_of(const std::vector<PlannedCopy>& plan, std::size_t offset) {
  for (std::size_t t = 0; t < plan.size(); ++t) {
    if (offset >= plan[t].destination_offset &&
        offset < plan[t].destination_offset + plan[t].bytes) {
      return fmt::format("task {} (source offset {}, destination offset {}, {} bytes)", t,
                         plan[t].source_offset, plan[t].destination_offset, plan[t].bytes);
    }
  }
  return "no task (a byte that must stay untouched)";
}

TEST_CASE("batched_copy equals memcpy and touches nothing else", "[gpu][copy]") {
  Stream stream;
  constexpr std::size_t kSourceBytes = std::size_t{3} << 20;
  std::mt19937_64 rng(5);
  Bytes source(kSourceBytes);
  for (unsigned char& b : source) b = static_cast<unsigned char>(rng());
  DeviceBuffer device_source(kSourceBytes);
  device_source.upload(source);

  // Empty tasks are skipped before batching, so the counts around one
  // launch's capacity have none, and the rest some.
  struct Case {
    int tasks;
    bool with_empty;
  };
  constexpr int kPerLaunch = cuda::kCopyTasksPerLaunch;
  const Case kCases[] = {{1, false},
                         {7, true},
                         {kPerLaunch - 1, false},
                         {kPerLaunch, false},
                         {kPerLaunch + 1, false},
                         {2 * kPerLaunch, false},
                         {3 * kPerLaunch + 5, true},
                         {1000, true}};
  for (const Case& c : kCases) {
    const std::vector<PlannedCopy> plan = plan_copies(c.tasks, c.with_empty, kSourceBytes, rng);
    const std::size_t destination_bytes = plan.back().destination_offset + plan.back().bytes + 64;
    Bytes expected(destination_bytes);
    for (unsigned char& b : expected) b = static_cast<unsigned char>(rng());
    DeviceBuffer device_destination(destination_bytes);
    device_destination.upload(expected);

    std::vector<cuda::CopyTask> tasks;
    for (const PlannedCopy& copy : plan) {
      std::memcpy(expected.data() + copy.destination_offset, source.data() + copy.source_offset,
                  copy.bytes);
      tasks.push_back({device_source.bytes() + copy.source_offset,
                       device_destination.bytes() + copy.destination_offset, copy.bytes});
    }
    const Status status = cuda::batched_copy(tasks, stream.get());
    INFO(status.message());
    REQUIRE(status.is_ok());
    stream.synchronize();
    const Bytes actual = device_destination.download();

    INFO(fmt::format("batched_copy: {} tasks{}, destination of {} bytes", c.tasks,
                     c.with_empty ? " (some empty)" : "", destination_bytes));
    const auto mismatch = std::mismatch(expected.begin(), expected.end(), actual.begin());
    if (mismatch.first != expected.end()) {
      const auto index = static_cast<std::size_t>(mismatch.first - expected.begin());
      FAIL_CHECK(fmt::format("byte {}: expected 0x{:02x}, actual 0x{:02x}, in {}", index,
                             *mismatch.first, *mismatch.second, owner_of(plan, index)));
    }
  }
}

TEST_CASE("batched_copy: no tasks, empty tasks, and a null pointer", "[gpu][copy]") {
  Stream stream;
  CHECK(cuda::batched_copy({}, stream.get()).is_ok());
  CHECK(cuda::batched_copy({cuda::CopyTask{nullptr, nullptr, 0}}, stream.get()).is_ok());

  // A bad task anywhere in the list queues none of the good ones.
  DeviceBuffer source(64);
  DeviceBuffer destination(64);
  const Bytes zeros(64, 0);
  Bytes ones(64, 1);
  source.upload(ones);
  destination.upload(zeros);
  const Status status = cuda::batched_copy({cuda::CopyTask{source.data(), destination.data(), 64},
                                            cuda::CopyTask{nullptr, destination.data(), 8}},
                                           stream.get());
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("batched_copy") && Catch::Contains("task 1"));
  stream.synchronize();
  CHECK(destination.download() == zeros);
}

TEST_CASE("bad arguments are errors that name the function and the values", "[gpu][errors]") {
  Stream stream;
  DeviceBuffer buffer(64);
  void* data = buffer.data();
  const cudaStream_t s = stream.get();
  using Catch::Contains;

  for (DataType dtype : kAllDataTypes) {
    INFO(to_string(dtype));
    Status status = cuda::scale(data, -1, dtype, 2.0, s);
    CHECK_FALSE(status.is_ok());
    CHECK_THAT(status.message(), Contains("scale") && Contains("-1"));
    status = cuda::divide(data, -3, dtype, 2, s);
    CHECK_FALSE(status.is_ok());
    CHECK_THAT(status.message(), Contains("divide") && Contains("-3"));
    status = cuda::fill_identity(data, -5, dtype, ReduceOp::kSum, s);
    CHECK_FALSE(status.is_ok());
    CHECK_THAT(status.message(), Contains("fill_identity") && Contains("-5"));

    CHECK_FALSE(cuda::scale(nullptr, 4, dtype, 2.0, s).is_ok());
    CHECK_FALSE(cuda::divide(nullptr, 4, dtype, 2, s).is_ok());
    CHECK_FALSE(cuda::fill_identity(nullptr, 4, dtype, ReduceOp::kMax, s).is_ok());
    status = cuda::divide(data, 4, dtype, 0, s);
    CHECK_FALSE(status.is_ok());
    CHECK_THAT(status.message(), Contains("divisor 0"));
    status = cuda::average(data, 4, dtype, 0, 2.0, s);
    CHECK_FALSE(status.is_ok());
    CHECK_THAT(status.message(), Contains("average") && Contains("ranks 0"));
    CHECK_FALSE(cuda::average(nullptr, 4, dtype, 2, 1.0, s).is_ok());
    CHECK(cuda::average(nullptr, 0, dtype, 2, 3.0, s).is_ok());

    // Count 0 queues nothing, with any pointer.
    CHECK(cuda::scale(nullptr, 0, dtype, 2.0, s).is_ok());
    CHECK(cuda::divide(nullptr, 0, dtype, 2, s).is_ok());
    CHECK(cuda::fill_identity(nullptr, 0, dtype, ReduceOp::kMin, s).is_ok());
  }
  const auto unknown_dtype = static_cast<DataType>(99);
  CHECK_FALSE(cuda::scale(data, 4, unknown_dtype, 2.0, s).is_ok());
  CHECK_FALSE(cuda::fill_identity(data, 4, DataType::kInt32, static_cast<ReduceOp>(99), s).is_ok());

  Status status =
      cuda::float_to_float16(static_cast<const float*>(data), static_cast<uint16_t*>(data), -2, s);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Contains("float_to_float16") && Contains("-2"));
  status = cuda::float16_to_float(static_cast<const uint16_t*>(data), nullptr, 4, s);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Contains("float16_to_float"));
  CHECK(cuda::float16_to_float(nullptr, nullptr, 0, s).is_ok());
  stream.synchronize();
}

}  // namespace
}  // namespace herd::ops
