// herd's whole GPU path through the public API: every collective on GPU
// buffers, fusion of many small GPU tensors, the readiness of data produced
// on the caller's stream, grouped allreduce, herd::join with GPU allreduces,
// every dtype (int16 takes the MPI path even under NCCL), against closed
// forms computed on the host; and the timeline's spans of a GPU allreduce,
// with the path that ran on the stream by name.
//
// Runs under mpiexec at any number of ranks, one GPU per rank (local rank
// modulo the devices; with HERD_GPU_ALLREDUCE=MPI several ranks may share
// one, which NCCL refuses). Without a visible GPU it prints why and exits 77,
// which CTest reports as skipped. tests/gpu/CMakeLists.txt runs it on the
// NCCL path, the hierarchical path and the MPI path.
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "herd/herd.h"
#include "herd/tensor.h"
#include "tests/gpu/gpu_test_skip.h"
#include "tests/mpi/mpi_test_util.h"

namespace {

using herd::DataType;
using herd::Device;
using herd::ReduceOp;
using herd::TensorView;
using namespace herd_test;
using Shape = std::vector<int64_t>;

struct Job {
  Recorder& rec;
  int rank;
  int size;
  int device;
};

// Fails the case on a CUDA error; the test cannot go on meaningfully after
// one, so the caller returns.
bool cuda_ok(CaseCheck& c, cudaError_t error, const char* call) {
  if (error == cudaSuccess) return true;
  c.fail(std::string(call) + ": " + cudaGetErrorString(error));
  return false;
}

// Device memory for `count` elements of `dtype` holding `host`'s bytes.
struct DeviceArray {
  void* data = nullptr;
  std::size_t bytes = 0;
  // Synchronized: cudaMemcpy from pageable memory may return before its
  // DMA lands, and herd's non-blocking stream does not wait for the legacy
  // stream it ran on.
  DeviceArray(const void* host, std::size_t n) : bytes(n) {
    cudaMalloc(&data, n > 0 ? n : 1);
    if (n > 0) cudaMemcpy(data, host, n, cudaMemcpyHostToDevice);
    cudaDeviceSynchronize();
  }
  ~DeviceArray() { cudaFree(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<uint64_t> to_host() const {
    std::vector<uint64_t> host(bytes / 8 + 1, 0);
    if (bytes > 0) cudaMemcpy(host.data(), data, bytes, cudaMemcpyDeviceToHost);
    return host;
  }
};

// Small values every dtype holds exactly, whose sums over 16 ranks stay
// exact too; products use 1 and 2 only, exact in int8 up to 6 ranks (the
// runs here have 1 and 2).
double input_value(DataType dtype, ReduceOp op, int rank, int64_t i) {
  if (op == ReduceOp::kProduct) return 1.0 + static_cast<double>((rank + i) % 2);
  const double v = static_cast<double>((rank * 7 + i * 3) % 13);
  // Signed types get negative values too.
  const bool is_unsigned = dtype == DataType::kUInt8;
  return is_unsigned ? v : v - 6.0;
}

double reduce_reference(DataType dtype, ReduceOp op, int size, int64_t i, double prescale,
                        double postscale) {
  double acc = 0.0;
  for (int r = 0; r < size; ++r) {
    const double v = input_value(dtype, op, r, i) * prescale;
    if (r == 0) {
      acc = v;
    } else if (op == ReduceOp::kSum || op == ReduceOp::kAverage) {
      acc += v;
    } else if (op == ReduceOp::kMin) {
      acc = std::min(acc, v);
    } else if (op == ReduceOp::kMax) {
      acc = std::max(acc, v);
    } else {
      acc *= v;
    }
  }
  if (op == ReduceOp::kAverage) {
    acc = is_integer(dtype) ? std::trunc(acc / size) : acc / size;
  }
  return acc * postscale;
}

// Floats may round the average's 1/p and the scales differently from the
// reference; integers must be exact.
bool close_enough(DataType dtype, double expected, double actual) {
  if (is_integer(dtype)) return expected == actual;
  return std::fabs(expected - actual) <= 2.0 * ulp(dtype, expected);
}

void check_result(CaseCheck& c, DataType dtype, const std::vector<uint64_t>& host, int64_t count,
                  const std::function<double(int64_t)>& expected) {
  for (int64_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double got = load_value(dtype, host.data(), i);
    if (!close_enough(dtype, want, got)) {
      c.mismatch(i, double_string(want), double_string(got));
    }
  }
}

void test_allreduce_sweep(const Job& job) {
  const DataType dtypes[] = {DataType::kFloat32,  DataType::kFloat64, DataType::kFloat16,
                             DataType::kBFloat16, DataType::kInt32,   DataType::kInt64,
                             DataType::kInt8,     DataType::kUInt8,   DataType::kInt16};
  const ReduceOp ops[] = {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax,
                          ReduceOp::kProduct};
  for (DataType dtype : dtypes) {
    const bool big = dtype == DataType::kFloat32 || dtype == DataType::kInt16;
    std::vector<int64_t> counts = {0, 1, 1000, 4099};
    if (big) counts.push_back((int64_t{1} << 20) + 3);
    for (ReduceOp op : ops) {
      for (int64_t count : counts) {
        // Scales only for floats (integer scaling truncates; tested in ops).
        const bool scaled = !is_integer(dtype) && op == ReduceOp::kSum;
        const double prescale = scaled ? 2.0 : 1.0;
        const double postscale = scaled ? 0.5 : 1.0;
        const std::string name =
            "sweep/" + dtype_name(dtype) + "/" + op_name(op) + "/" + std::to_string(count);
        CaseCheck c(job.rec, name);
        std::vector<uint64_t> host = storage_for(dtype, count);
        for (int64_t i = 0; i < count; ++i) {
          store_value(dtype, host.data(), i, input_value(dtype, op, job.rank, i));
        }
        const std::size_t bytes = static_cast<std::size_t>(count) * dtype_bytes(dtype);
        DeviceArray input(host.data(), bytes);
        DeviceArray output(host.data(), bytes);
        const TensorView in{input.data, dtype, {count}, Device::gpu(job.device)};
        const TensorView out{output.data, dtype, {count}, Device::gpu(job.device)};
        try {
          herd::allreduce(name, in, out, op, prescale, postscale);
        } catch (const herd::Error& e) {
          c.fail(std::string("threw: ") + e.what());
          continue;
        }
        check_result(c, dtype, output.to_host(), count, [&](int64_t i) {
          return reduce_reference(dtype, op, job.size, i, prescale, postscale);
        });
        // The input is the caller's and stays as it was.
        const std::vector<uint64_t> kept = input.to_host();
        if (bytes > 0 && std::memcmp(kept.data(), host.data(), bytes) != 0) {
          c.fail("the input changed");
        }
      }
    }
  }
}

// Many small tensors submitted at once: fused into one buffer, packed and
// unpacked by the batched copy kernel.
void test_fusion(const Job& job) {
  constexpr int kTensors = 40;
  CaseCheck c(job.rec, "fusion of 40 tensors");
  std::vector<std::unique_ptr<DeviceArray>> arrays;
  std::vector<herd::Handle> handles;
  for (int t = 0; t < kTensors; ++t) {
    const int64_t count = 1 + t * 97;
    std::vector<float> host(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i) host[i] = static_cast<float>(job.rank + t + i % 5);
    arrays.push_back(std::make_unique<DeviceArray>(host.data(), host.size() * sizeof(float)));
    const TensorView view{
        arrays.back()->data, DataType::kFloat32, {count}, Device::gpu(job.device)};
    handles.push_back(
        herd::allreduce_async("fusion/" + std::to_string(t), view, view, ReduceOp::kSum));
  }
  for (herd::Handle& handle : handles) herd::wait(handle);
  for (int t = 0; t < kTensors; ++t) {
    const int64_t count = 1 + t * 97;
    const std::vector<uint64_t> host = arrays[t]->to_host();
    check_result(c, DataType::kFloat32, host, count, [&](int64_t i) {
      double sum = 0;
      for (int r = 0; r < job.size; ++r) sum += r + t + i % 5;
      return sum;
    });
  }
}

// The timeline of one GPU allreduce on this rank: its negotiation, its queue,
// and its operation holding the path that ran on the stream, NCCL's unless
// HERD_GPU_ALLREDUCE=MPI or herd lacks NCCL.
void test_timeline(const Job& job) {
  CaseCheck c(job.rec, "timeline of a GPU allreduce");
  const std::string stem = "/tmp/herd_gpu_timeline_" + std::to_string(getpid());
  const std::string file = stem + "." + std::to_string(job.rank) + ".json";
  std::vector<float> host(1000, 1.0f);
  DeviceArray array(host.data(), host.size() * sizeof(float));
  const TensorView view{array.data, DataType::kFloat32, {1000}, Device::gpu(job.device)};
  herd::start_timeline(stem + ".%r.json");
  herd::allreduce("gpu_timeline/x", view, view, ReduceOp::kSum);
  herd::stop_timeline();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  std::remove(file.c_str());
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(text.str());
  } catch (const nlohmann::json::exception& e) {
    c.fail(file + " is not JSON: " + e.what());
    return;
  }
  int64_t pid = -1;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "process_name" &&
        event.at("args").at("name") == "gpu_timeline/x") {
      pid = event.at("pid");
    }
  }
  std::vector<std::string> spans;
  std::string got;
  for (const auto& event : trace.at("traceEvents")) {
    if (event.value("pid", int64_t{-2}) != pid) continue;
    if (event.at("ph") == "B") spans.push_back("B:" + event.at("name").get<std::string>());
    if (event.at("ph") == "E") spans.push_back("E");
  }
  for (const std::string& span : spans) got += span + " ";
  std::string setting = std::getenv("HERD_GPU_ALLREDUCE") ? std::getenv("HERD_GPU_ALLREDUCE") : "";
  std::transform(setting.begin(), setting.end(), setting.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  const bool staged = !herd::nccl_built() || setting == "mpi";
  const std::vector<std::string> expected = {"B:NEGOTIATE_ALLREDUCE",
                                             "E",
                                             "B:QUEUE",
                                             "E",
                                             "B:ALLREDUCE",
                                             staged ? "B:STAGED_ALLREDUCE" : "B:NCCL_ALLREDUCE",
                                             "E",
                                             "E"};
  if (spans != expected) c.fail("spans " + got);
}

// Data produced on the caller's stream right before the submission: herd
// must wait for that work (the ready event), or it reduces zeros.
void test_stream_readiness(const Job& job) {
  CaseCheck c(job.rec, "stream readiness");
  const int64_t count = int64_t{16} << 20;  // 64 MiB of float32: milliseconds to copy
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
  float* pinned = nullptr;
  void* data = nullptr;
  cudaStream_t stream = nullptr;
  if (!cuda_ok(c, cudaHostAlloc(reinterpret_cast<void**>(&pinned), bytes, cudaHostAllocDefault),
               "cudaHostAlloc") ||
      !cuda_ok(c, cudaMalloc(&data, bytes), "cudaMalloc") ||
      !cuda_ok(c, cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate")) {
    return;
  }
  for (int64_t i = 0; i < count; ++i) pinned[i] = static_cast<float>(job.rank + 1);
  cuda_ok(c, cudaMemsetAsync(data, 0, bytes, stream), "cudaMemsetAsync");
  cuda_ok(c, cudaMemcpyAsync(data, pinned, bytes, cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
  TensorView view{data, DataType::kFloat32, {count}, Device::gpu(job.device)};
  view.stream = stream;
  try {
    herd::allreduce("readiness", view, view, ReduceOp::kSum);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
  }
  std::vector<float> result(static_cast<std::size_t>(count));
  cuda_ok(c, cudaMemcpy(result.data(), data, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  const float expected = static_cast<float>(job.size * (job.size + 1) / 2);
  for (int64_t i = 0; i < count; ++i) {
    if (result[i] != expected) {
      c.mismatch(i, double_string(expected), double_string(result[i]));
      if (i > 8) break;
    }
  }
  cudaStreamDestroy(stream);
  cudaFree(data);
  cudaFreeHost(pinned);
}

void test_grouped(const Job& job) {
  CaseCheck c(job.rec, "grouped allreduce");
  const std::vector<int64_t> counts = {5, 0, 3000};
  std::vector<std::unique_ptr<DeviceArray>> arrays;
  std::vector<TensorView> views;
  std::vector<std::string> names;
  for (std::size_t m = 0; m < counts.size(); ++m) {
    std::vector<double> host(static_cast<std::size_t>(counts[m]) + 1);
    for (int64_t i = 0; i < counts[m]; ++i) host[i] = job.rank * 10.0 + m + i % 3;
    arrays.push_back(std::make_unique<DeviceArray>(host.data(), counts[m] * sizeof(double)));
    views.push_back(
        {arrays.back()->data, DataType::kFloat64, {counts[m]}, Device::gpu(job.device)});
    names.push_back("grouped/" + std::to_string(m));
  }
  try {
    herd::grouped_allreduce(names, views, views, ReduceOp::kMax);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  for (std::size_t m = 0; m < counts.size(); ++m) {
    check_result(c, DataType::kFloat64, arrays[m]->to_host(), counts[m],
                 [&](int64_t i) { return (job.size - 1) * 10.0 + m + i % 3; });
  }
}

void test_allgather(const Job& job) {
  CaseCheck c(job.rec, "allgather, unequal rows");
  const int64_t rows = job.rank + 1;
  std::vector<int32_t> host(static_cast<std::size_t>(rows * 3));
  for (int64_t i = 0; i < rows * 3; ++i) host[i] = job.rank * 1000 + static_cast<int32_t>(i);
  DeviceArray input(host.data(), host.size() * sizeof(int32_t));
  herd::Tensor output;
  try {
    herd::allgather("allgather", {input.data, DataType::kInt32, {rows, 3}, Device::gpu(job.device)},
                    &output);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  if (output.device() != Device::gpu(job.device)) c.fail("output not on this rank's GPU");
  const int64_t total_rows = int64_t{job.size} * (job.size + 1) / 2;
  if (output.shape() != Shape{total_rows, 3}) c.fail("shape " + shape_string(output.shape()));
  std::vector<int32_t> result(static_cast<std::size_t>(total_rows * 3));
  cudaMemcpy(result.data(), output.data(), result.size() * sizeof(int32_t), cudaMemcpyDeviceToHost);
  int64_t at = 0;
  for (int r = 0; r < job.size; ++r) {
    for (int64_t i = 0; i < (r + 1) * 3; ++i, ++at) {
      const int32_t want = r * 1000 + static_cast<int32_t>(i);
      if (result[at] != want) c.mismatch(at, std::to_string(want), std::to_string(result[at]));
    }
  }
}

void test_broadcast(const Job& job) {
  CaseCheck c(job.rec, "broadcast from the last rank");
  const int root = job.size - 1;
  std::vector<uint8_t> host(100003);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(job.rank * 31 + i);
  DeviceArray data(host.data(), host.size());
  try {
    herd::broadcast(
        "broadcast",
        {data.data, DataType::kUInt8, {static_cast<int64_t>(host.size())}, Device::gpu(job.device)},
        root);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  const std::vector<uint64_t> result = data.to_host();
  const auto* bytes = reinterpret_cast<const uint8_t*>(result.data());
  for (std::size_t i = 0; i < host.size(); ++i) {
    const auto want = static_cast<uint8_t>(root * 31 + i);
    if (bytes[i] != want)
      c.mismatch(static_cast<int64_t>(i), std::to_string(want), std::to_string(bytes[i]));
  }
}

void test_alltoall(const Job& job) {
  CaseCheck c(job.rec, "alltoall, unequal splits");
  // Rank r sends peer p (p + r) % 3 rows of 2 floats: value 100 r + 10 p + k.
  std::vector<int64_t> splits;
  std::vector<float> host;
  for (int p = 0; p < job.size; ++p) {
    const int64_t rows = (p + job.rank) % 3;
    splits.push_back(rows);
    for (int64_t k = 0; k < rows * 2; ++k) host.push_back(100.0f * job.rank + 10.0f * p + k);
  }
  const auto rows = static_cast<int64_t>(host.size() / 2);
  DeviceArray input(host.data(), host.size() * sizeof(float));
  herd::Tensor output;
  std::vector<int64_t> received;
  try {
    herd::alltoall("alltoall", {input.data, DataType::kFloat32, {rows, 2}, Device::gpu(job.device)},
                   splits, &output, &received);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  std::vector<float> result(static_cast<std::size_t>(output.num_elements()));
  cudaMemcpy(result.data(), output.data(), result.size() * sizeof(float), cudaMemcpyDeviceToHost);
  std::size_t at = 0;
  for (int r = 0; r < job.size; ++r) {
    const int64_t from_r = (job.rank + r) % 3;
    if (received.size() != static_cast<std::size_t>(job.size) || received[r] != from_r) {
      c.fail("received splits wrong for rank " + std::to_string(r));
      return;
    }
    for (int64_t k = 0; k < from_r * 2; ++k, ++at) {
      const float want = 100.0f * r + 10.0f * job.rank + k;
      if (at >= result.size() || result[at] != want) {
        c.mismatch(static_cast<int64_t>(at), double_string(want),
                   at < result.size() ? double_string(result[at]) : "missing");
      }
    }
  }
}

void test_reducescatter(const Job& job) {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAverage}) {
    CaseCheck c(job.rec, "reducescatter " + op_name(op));
    const int64_t rows = 2 * job.size + 1;
    std::vector<float> host(static_cast<std::size_t>(rows * 4));
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = static_cast<float>(job.rank + i % 9);
    DeviceArray input(host.data(), host.size() * sizeof(float));
    herd::Tensor output;
    try {
      herd::reducescatter("reducescatter/" + op_name(op),
                          {input.data, DataType::kFloat32, {rows, 4}, Device::gpu(job.device)},
                          &output, op);
    } catch (const herd::Error& e) {
      c.fail(std::string("threw: ") + e.what());
      continue;
    }
    // The first rows % size ranks get one row more.
    int64_t first_row = 0;
    for (int r = 0; r < job.rank; ++r) first_row += rows / job.size + (r < rows % job.size ? 1 : 0);
    const int64_t my_rows = rows / job.size + (job.rank < rows % job.size ? 1 : 0);
    if (output.shape() != Shape{my_rows, 4}) c.fail("shape " + shape_string(output.shape()));
    std::vector<uint64_t> result(static_cast<std::size_t>(my_rows * 4) / 2 + 1);
    cudaMemcpy(result.data(), output.data(), static_cast<std::size_t>(my_rows * 4) * sizeof(float),
               cudaMemcpyDeviceToHost);
    check_result(c, DataType::kFloat32, result, my_rows * 4, [&](int64_t i) {
      const int64_t global = first_row * 4 + i;
      double sum = 0;
      for (int r = 0; r < job.size; ++r) sum += r + global % 9;
      return op == ReduceOp::kAverage ? sum / job.size : sum;
    });
  }
}

// The last rank joins at once; the others average a GPU tensor without it:
// it contributes the identity (zeros) from its GPU, and the divisor is still
// the job's size.
void test_join(const Job& job) {
  if (job.size < 2) return;
  CaseCheck c(job.rec, "join with GPU allreduces");
  const bool joins_first = job.rank == job.size - 1;
  try {
    if (!joins_first) {
      std::vector<float> host(1000, static_cast<float>(job.rank + 1));
      DeviceArray data(host.data(), host.size() * sizeof(float));
      const TensorView view{data.data, DataType::kFloat32, {1000}, Device::gpu(job.device)};
      herd::allreduce("join/avg", view, view, ReduceOp::kAverage);
      const int others = job.size - 1;
      const double expected = others * (others + 1) / 2.0 / job.size;
      std::vector<uint64_t> result = data.to_host();
      check_result(c, DataType::kFloat32, result, 1000, [&](int64_t) { return expected; });
    }
    const int last = herd::join();
    if (last < 0 || last >= job.size) c.fail("join returned " + std::to_string(last));
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int devices = herd::testing::visible_devices_or_explain();
  if (devices == 0) return herd::testing::kSkipped;
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_gpu_runtime", world.rank);
  try {
    herd::init();
    const int device = herd::local_rank() % devices;
    cudaSetDevice(device);
    const Job job{rec, world.rank, world.size, device};
    if (world.rank == 0) {
      std::printf("test_gpu_runtime: %d ranks, %d device(s), nccl_built %d\n", world.size, devices,
                  herd::nccl_built() ? 1 : 0);
    }
    test_allreduce_sweep(job);
    test_fusion(job);
    test_stream_readiness(job);
    test_grouped(job);
    test_allgather(job);
    test_broadcast(job);
    test_alltoall(job);
    test_reducescatter(job);
    test_join(job);
    test_timeline(job);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
