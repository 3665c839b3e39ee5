// The device KVStore types with GPU values (kvstore/gpu_merge.h): MXNet's
// canonical vectors with values and outputs on GPU 0 (and on GPUs 0 and 1
// where there are two), the merge GPU chosen by MXNet's rule, host and GPU
// values mixed in one push, sums in float32, float16, float64 and int32
// against references computed here in list order, 2-bit compression of GPU
// values against the host path and an independent reference, refused views,
// and ([dist], under mpiexec) dist_device_sync with GPU values.
//
// Without a visible GPU the program prints why and exits 77, which CTest
// reports as skipped (gpu_test_main.cc).
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/float16.h"
#include "herd/herd.h"
#include "herd/kvstore.h"
#include "tests/unit/kvstore/compression_reference.h"
#include "tests/unit/kvstore/kvstore_test_util.h"

namespace herd {
namespace kv {
namespace {

using Shape = std::vector<int64_t>;
using test::check_throws_with;

void cuda_require(cudaError_t error, const char* call) {
  INFO(call << ": " << cudaGetErrorString(error));
  REQUIRE(error == cudaSuccess);
}
#define CUDA_REQUIRE(call) cuda_require((call), #call)

int gpu_count() {
  int devices = 0;
  CUDA_REQUIRE(cudaGetDeviceCount(&devices));
  return devices;
}

// The GPUs the tests spread values over: 0, and 1 where there is one.
std::vector<int> test_gpus() {
  return gpu_count() >= 2 ? std::vector<int>{0, 1} : std::vector<int>{0};
}

int64_t elements_of(const Shape& shape) {
  int64_t n = 1;
  for (int64_t extent : shape) n *= extent;
  return n;
}

// Device memory of one GPU, of a dtype and shape, filled from host bytes.
class GpuArray {
 public:
  GpuArray(int gpu, DataType dtype, Shape shape, const void* host)
      : gpu_(gpu), dtype_(dtype), shape_(std::move(shape)) {
    bytes_ = static_cast<std::size_t>(elements_of(shape_)) * element_size(dtype_);
    CUDA_REQUIRE(cudaSetDevice(gpu_));
    CUDA_REQUIRE(cudaMalloc(&data_, bytes_ > 0 ? bytes_ : 1));
    if (bytes_ > 0) CUDA_REQUIRE(cudaMemcpy(data_, host, bytes_, cudaMemcpyHostToDevice));
    CUDA_REQUIRE(cudaDeviceSynchronize());
  }
  GpuArray(int gpu, const Shape& shape, float fill)
      : GpuArray(gpu, DataType::kFloat32, shape,
                 std::vector<float>(static_cast<std::size_t>(elements_of(shape)), fill).data()) {}
  ~GpuArray() { (void)cudaFree(data_); }
  GpuArray(GpuArray&& other) noexcept
      : gpu_(other.gpu_), dtype_(other.dtype_), shape_(other.shape_), bytes_(other.bytes_) {
    data_ = other.data_;
    other.data_ = nullptr;
  }
  GpuArray(const GpuArray&) = delete;
  GpuArray& operator=(const GpuArray&) = delete;

  TensorView view() const { return TensorView{data_, dtype_, shape_, Device::gpu(gpu_)}; }

  template <typename T>
  std::vector<T> to_host() const {
    std::vector<T> host(bytes_ / sizeof(T));
    CUDA_REQUIRE(cudaMemcpy(host.data(), data_, bytes_, cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  int gpu_;
  DataType dtype_;
  Shape shape_;
  std::size_t bytes_ = 0;
  void* data_ = nullptr;
};

void check_all(const std::vector<float>& values, float expected, const std::string& what) {
  for (std::size_t i = 0; i < values.size(); ++i) {
    INFO(what << " element " << i);
    REQUIRE(values[i] == expected);
  }
}

void check_all(const GpuArray& array, float expected, const std::string& what) {
  check_all(array.to_host<float>(), expected, what);
}

// stored += 2 * merged: the tutorial's updater.
void add_twice(const Key& /*key*/, const TensorView& merged, TensorView stored) {
  const auto* in = static_cast<const float*>(merged.data);
  auto* out = static_cast<float*>(stored.data);
  for (int64_t i = 0; i < stored.num_elements(); ++i) out[i] += 2 * in[i];
}

// `count` arrays of `fill`, the i-th on gpus[i % gpus.size()].
std::vector<GpuArray> spread(const std::vector<int>& gpus, int count, const Shape& shape,
                             float fill) {
  std::vector<GpuArray> arrays;
  for (int i = 0; i < count; ++i) {
    arrays.emplace_back(gpus[static_cast<std::size_t>(i) % gpus.size()], shape, fill);
  }
  return arrays;
}

std::vector<TensorView> views_of(const std::vector<GpuArray>& arrays) {
  std::vector<TensorView> views;
  for (const GpuArray& array : arrays) views.push_back(array.view());
  return views;
}

TEST_CASE("device: MXNet's canonical vectors with GPU values and outputs", "[kvstore]") {
  const std::vector<int> gpus = test_gpus();
  const Shape shape = {2, 3};
  auto kv = create("device");
  GpuArray twos(0, shape, 2), out0(0, shape, 0), out_last(gpus.back(), shape, 0);
  std::vector<float> host_out(6, 0);
  const TensorView host_view{host_out.data(), DataType::kFloat32, shape};
  kv->init(3, twos.view());
  kv->pull(3, {out0.view(), host_view, out_last.view()});
  check_all(out0, 2, "init 3 <- 2s, pull to gpu:0");
  check_all(host_out, 2, "init 3 <- 2s, pull to the host");
  check_all(out_last, 2, "init 3 <- 2s, pull to the last GPU");

  GpuArray eights(gpus.back(), shape, 8);
  kv->push(3, eights.view());
  kv->pull(3, out0.view());
  check_all(out0, 8, "push 8s (assign)");

  const std::vector<GpuArray> ones = spread(gpus, 4, shape, 1);
  kv->push(3, views_of(ones));
  kv->pull(3, {out_last.view(), out0.view()});
  check_all(out0, 4, "push four arrays of ones");
  check_all(out_last, 4, "push four arrays of ones, second output");

  kv->set_updater(add_twice);
  kv->push(3, ones[0].view());
  kv->pull(3, out0.view());
  check_all(out0, 6, "updater stored += 2 * pushed");

  const std::vector<Key> keys = {5, 7, 9};
  kv->init(keys, {ones[0].view(), ones[1].view(), ones[0].view()});
  kv->push(keys, {{ones[0].view()}, {ones[1].view()}, {ones[2].view()}});
  std::vector<GpuArray> outs = spread(gpus, 3, shape, 0);
  kv->pull(keys, {{outs[0].view()}, {outs[1].view()}, {outs[2].view()}});
  for (const GpuArray& o : outs) check_all(o, 3, "keys 5, 7, 9: push ones with the updater");
  kv->push(keys, {views_of(ones), views_of(ones), views_of(ones)});
  kv->pull(keys, {{outs[0].view()}, {outs[1].view()}, {outs[2].view()}});
  for (const GpuArray& o : outs) check_all(o, 11, "push 4 devices of ones");

  // The pushed values are read, never written.
  for (const GpuArray& one : ones) check_all(one, 1, "pushed values unchanged");
}

// The merge GPU cannot be seen through the API; the buffers it allocates can:
// a key's first push with values on GPUs 0 and 1 allocates its running sum
// and one staging buffer (2 x its bytes) on its merge GPU, and nothing on the
// other.
TEST_CASE("device: each key is summed on the GPU MXNet's rule picks", "[kvstore]") {
  if (gpu_count() < 2) {
    WARN("skipped: the merge GPU choice needs 2 GPUs; this machine has " << gpu_count());
    return;
  }
  auto kv = create("device");
  // Init order and sizes (elements): key 0: 6M, 1: 4M, 2: 3M, 3: 2M. Placed at
  // the first push, largest first, each on the GPU with fewer elements so far
  // (ties: the lower index): 0 -> gpu 0 (6M, 0), 1 -> gpu 1 (6M, 4M),
  // 2 -> gpu 1 (6M, 7M), 3 -> gpu 0 (8M, 7M).
  const std::vector<int64_t> sizes = {6 << 20, 4 << 20, 3 << 20, 2 << 20};
  const std::vector<int> expected_gpu = {0, 1, 1, 0};
  std::vector<std::vector<GpuArray>> values;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    values.push_back(spread({0, 1}, 2, {sizes[k]}, static_cast<float>(k + 1)));
    kv->init(static_cast<int>(k), values[k][0].view());
  }
  auto free_bytes = [](int gpu) {
    std::size_t free = 0, total = 0;
    CUDA_REQUIRE(cudaSetDevice(gpu));
    CUDA_REQUIRE(cudaMemGetInfo(&free, &total));
    return static_cast<int64_t>(free);
  };
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    INFO("key " << k << " of " << sizes[k] << " elements, expected on gpu:" << expected_gpu[k]);
    const int64_t free0 = free_bytes(0), free1 = free_bytes(1);
    kv->push(static_cast<int>(k), views_of(values[k]));
    const int64_t used0 = free0 - free_bytes(0), used1 = free1 - free_bytes(1);
    const int64_t bytes = sizes[k] * 4;
    const int64_t on_merge = expected_gpu[k] == 0 ? used0 : used1;
    const int64_t on_other = expected_gpu[k] == 0 ? used1 : used0;
    INFO("allocated on gpu:0 " << used0 << " bytes, on gpu:1 " << used1);
    CHECK(on_merge >= 2 * bytes);
    CHECK(on_other < bytes);
    GpuArray out(1 - expected_gpu[k], {sizes[k]}, 0);
    kv->pull(static_cast<int>(k), out.view());
    check_all(out, 2.0f * static_cast<float>(k + 1), "sum of the key's two values");
  }
}

TEST_CASE("device: host and GPU values in one push are summed on the GPU", "[kvstore]") {
  const std::vector<int> gpus = test_gpus();
  const Shape shape = {1000};
  auto kv = create("device");
  std::vector<float> host_ones(1000, 1.0f), host_out(1000, 0.0f);
  const TensorView host_one{host_ones.data(), DataType::kFloat32, shape};
  const TensorView host_view{host_out.data(), DataType::kFloat32, shape};
  kv->init(0, host_one);
  GpuArray a(gpus.front(), shape, 2), b(gpus.back(), shape, 4);
  kv->push(0, {host_one, a.view(), b.view()});
  kv->pull(0, host_view);
  check_all(host_out, 7, "host 1 + gpu 2 + gpu 4");

  // pushpull in place into GPU values: each value receives the sum.
  GpuArray c(gpus.front(), shape, 3), d(gpus.back(), shape, 5);
  kv->pushpull(0, {c.view(), d.view()});
  check_all(c, 8, "pushpull in place, first value");
  check_all(d, 8, "pushpull in place, second value");
  GpuArray out(gpus.back(), shape, 0);
  kv->pushpull(0, {host_one, c.view()}, {out.view(), host_view});
  check_all(out, 9, "pushpull into a GPU output");
  check_all(host_out, 9, "pushpull into a host output");
}

// Three values of `dtype` on the test GPUs, pushed and pulled back; the pulled
// bits must equal `expected`, computed by the caller in list order.
template <typename T>
void check_sum(DataType dtype, const std::vector<std::vector<T>>& values,
               const std::vector<T>& expected) {
  const std::vector<int> gpus = test_gpus();
  const Shape shape = {static_cast<int64_t>(expected.size())};
  auto kv = create("device");
  std::vector<GpuArray> arrays;
  for (std::size_t i = 0; i < values.size(); ++i) {
    arrays.emplace_back(gpus[i % gpus.size()], dtype, shape, values[i].data());
  }
  kv->init(0, arrays[0].view());
  kv->push(0, views_of(arrays));
  std::vector<T> zeros(expected.size(), T{});
  GpuArray out(gpus.back(), dtype, shape, zeros.data());
  kv->pull(0, out.view());
  const std::vector<T> got = out.to_host<T>();
  REQUIRE(std::memcmp(got.data(), expected.data(), expected.size() * sizeof(T)) == 0);
}

TEST_CASE("device: GPU sums equal the CPU's, bitwise, in every dtype tested", "[kvstore]") {
  const std::size_t n = 4099;  // not a multiple of any block size
  std::mt19937 random(7);
  std::uniform_real_distribution<float> uniform(-100.0f, 100.0f);

  SECTION("float32") {
    std::vector<std::vector<float>> values(3, std::vector<float>(n));
    for (auto& v : values) {
      for (float& x : v) x = uniform(random);
    }
    std::vector<float> expected(n);
    for (std::size_t i = 0; i < n; ++i) expected[i] = (values[0][i] + values[1][i]) + values[2][i];
    check_sum(DataType::kFloat32, values, expected);
  }
  SECTION("float64") {
    std::vector<std::vector<double>> values(3, std::vector<double>(n));
    for (auto& v : values) {
      for (double& x : v) x = static_cast<double>(uniform(random)) / 3.0;
    }
    std::vector<double> expected(n);
    for (std::size_t i = 0; i < n; ++i) expected[i] = (values[0][i] + values[1][i]) + values[2][i];
    check_sum(DataType::kFloat64, values, expected);
  }
  SECTION("float16: widened, added, rounded back after each addition") {
    std::vector<std::vector<uint16_t>> values(3, std::vector<uint16_t>(n));
    for (auto& v : values) {
      std::vector<float> floats(n);
      for (float& x : floats) x = uniform(random);
      float_to_float16(floats.data(), v.data(), static_cast<int64_t>(n));
    }
    std::vector<uint16_t> expected = values[0];
    for (std::size_t k = 1; k < values.size(); ++k) {
      for (std::size_t i = 0; i < n; ++i) {
        float a, b;
        float16_to_float(&expected[i], &a, 1);
        float16_to_float(&values[k][i], &b, 1);
        const float sum = a + b;
        float_to_float16(&sum, &expected[i], 1);
      }
    }
    check_sum(DataType::kFloat16, values, expected);
  }
  SECTION("int32 wraps") {
    std::vector<std::vector<int32_t>> values(3, std::vector<int32_t>(n));
    std::uniform_int_distribution<int32_t> any_int;
    for (auto& v : values) {
      for (int32_t& x : v) x = any_int(random);
    }
    std::vector<int32_t> expected(n);
    for (std::size_t i = 0; i < n; ++i) {
      uint32_t sum = 0;
      for (const auto& v : values) sum += static_cast<uint32_t>(v[i]);
      expected[i] = static_cast<int32_t>(sum);
    }
    check_sum(DataType::kInt32, values, expected);
  }
}

TEST_CASE("device: 2-bit compression of GPU values equals the host path bitwise", "[kvstore]") {
  const std::vector<int> gpus = test_gpus();
  const int64_t n = 1001;
  const Shape shape = {n};
  const GradientCompression compression{"2bit", 0.5};
  auto on_gpu = create("device");
  auto on_host = create("device");
  std::vector<float> zeros(static_cast<std::size_t>(n), 0.0f);
  const TensorView zero_view{zeros.data(), DataType::kFloat32, shape};
  on_gpu->init(0, zero_view);
  on_host->init(0, zero_view);
  on_gpu->set_gradient_compression(compression);
  on_host->set_gradient_compression(compression);

  const CompressionParams params = parse_compression("2bit", 0.5);
  std::vector<std::vector<float>> residuals(3, std::vector<float>(zeros.size(), 0.0f));
  std::mt19937 random(11);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    std::vector<std::vector<float>> grads(3, std::vector<float>(zeros.size()));
    std::vector<TensorView> host_views;
    std::vector<GpuArray> gpu_values;
    for (std::size_t d = 0; d < grads.size(); ++d) {
      for (float& x : grads[d]) x = uniform(random);
      host_views.push_back(TensorView{grads[d].data(), DataType::kFloat32, shape});
      gpu_values.emplace_back(gpus[d % gpus.size()], DataType::kFloat32, shape, grads[d].data());
    }
    on_gpu->push(0, views_of(gpu_values));
    on_host->push(0, host_views);
    GpuArray out(gpus.back(), shape, -1);
    std::vector<float> host_out(zeros.size(), -1.0f);
    on_gpu->pull(0, out.view());
    on_host->pull(0, TensorView{host_out.data(), DataType::kFloat32, shape});
    const std::vector<float> got = out.to_host<float>();
    REQUIRE(std::memcmp(got.data(), host_out.data(), got.size() * sizeof(float)) == 0);

    // Independently: each value dequantized with its own residual, summed in
    // list order (without an updater the store assigns the sum).
    std::vector<float> expected(zeros.size(), 0.0f);
    for (std::size_t d = 0; d < grads.size(); ++d) {
      const test::Reference ref = test::reference_quantize(params, grads[d], residuals[d]);
      for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += ref.dequantized[i];
    }
    REQUIRE(std::memcmp(got.data(), expected.data(), got.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("device: views that are not memory of the GPU they name are refused", "[kvstore]") {
  const int devices = gpu_count();
  const Shape shape = {2, 3};
  auto kv = create("device");
  GpuArray value(0, shape, 1), out(0, shape, 0);
  kv->init(3, value.view());

  TensorView beyond = value.view();
  beyond.device = Device::gpu(devices);
  check_throws_with([&] { kv->push(3, beyond); },
                    {"kvstore 'device'", "push of key 3", "gpu:" + std::to_string(devices),
                     "sees " + std::to_string(devices) + " CUDA device(s)"});
  std::vector<float> host(6, 1.0f);
  const TensorView host_as_gpu{host.data(), DataType::kFloat32, shape, Device::gpu(0)};
  check_throws_with([&] { kv->pull(3, host_as_gpu); },
                    {"kvstore 'device'", "pull of key 3", "gpu:0", "host memory"});
  if (devices >= 2) {
    GpuArray elsewhere(1, shape, 5);
    TensorView mislabelled = elsewhere.view();
    mislabelled.device = Device::gpu(0);
    check_throws_with(
        [&] {
          kv->push(3, {value.view(), mislabelled});
        },
        {"kvstore 'device'", "push of key 3", "value 1 of 2", "memory of gpu:1"});
  }
  kv->pull(3, out.view());
  check_all(out, 1, "the key's value after the refused calls");

  // Only the device types take GPU values.
  auto local = create("local");
  check_throws_with([&] { local->init(3, value.view()); },
                    {"kvstore 'local'", "init of key 3", "gpu:0", "host memory"});
}

// Under mpiexec (tests/gpu/CMakeLists.txt): every rank pushes rank + 1 from
// each of its GPU values; the replicas hold N (N + 1) / 2 per value.
TEST_CASE("dist_device_sync: GPU values summed on a GPU, then over the workers", "[dist]") {
  herd::init();
  const int size = herd::size(), rank = herd::rank();
  const std::vector<int> gpus = test_gpus();
  {
    auto kv = create("dist_device_sync");
    const Shape shape = {1000};
    GpuArray zeros(gpus.front(), shape, 0);
    kv->init(0, zeros.view());
    for (int round = 0; round < 2; ++round) {
      INFO("round " << round);
      const std::vector<GpuArray> values = spread(gpus, 2, shape, static_cast<float>(rank + 1));
      kv->push(0, views_of(values));
      GpuArray out(gpus.back(), shape, -1);
      kv->pull(0, out.view());
      check_all(out, static_cast<float>(size * (size + 1)), "2 values x N (N + 1) / 2");
    }
    kv->barrier();
  }
  herd::shutdown();
}

}  // namespace
}  // namespace kv
}  // namespace herd
