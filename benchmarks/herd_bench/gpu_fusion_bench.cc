// gpu_bench.h's fusion benchmark (herd-bench fusion): how fast herd packs
// gradients into its device fusion buffer and unpacks them, against the
// device-to-device copy of as many bytes in one piece.
//
// For each case (a model's gradients, or N tensors of one size), the
// tensors lie back to back in an input arena in registration order, as a
// model's parameters often do, and the rows are, each timed with CUDA events
// over -n calls back to back after -w untimed ones, on one stream:
//   pack:            ops::cuda::batched_copy of every tensor, in backward
//                    order, into the fusion buffer: what herd's GPU
//                    executor queues before a fused collective;
//   unpack:          the same from the fusion buffer into an output arena;
//   per-tensor:      one cudaMemcpyAsync per tensor, the same packing
//                    without a batched kernel;
//   d2d:             one cudaMemcpyAsync of all the bytes: the ceiling.
// GB/s counts each byte once (bytes copied / time; the memory moves twice
// as much, a read and a write). The pack and unpack results are copied back
// and compared byte for byte with the packing done on the host.
#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <herd/tensor.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/gpu_bench.h"
#include "benchmarks/herd_bench/gpu_cuda.h"
#include "benchmarks/herd_bench/model_shapes.h"
#include "benchmarks/herd_bench/step_plan.h"
#include "benchmarks/herd_bench/table.h"
#include "ops/cuda/device_kernels.h"

namespace herd::bench {
namespace {

// One case: tensor sizes in bytes, in registration order, and the order in
// which they are packed.
struct FusionCase {
  std::string name;
  std::vector<std::size_t> bytes;  // registration order
  std::vector<std::size_t> order;  // packing order: indices into `bytes`
};

FusionCase model_case(Model model) {
  FusionCase c;
  c.name = to_string(model);
  const std::vector<ParameterTensor> parameters = model_parameters(model);
  for (const ParameterTensor& p : parameters) {
    c.bytes.push_back(static_cast<std::size_t>(p.num_elements()) * sizeof(float));
  }
  for (const StepTensor& t : plan_step(parameters, 0)) {
    c.order.push_back(static_cast<std::size_t>(t.index));
  }
  return c;
}

FusionCase uniform_case(std::size_t tensors, std::size_t bytes) {
  FusionCase c;
  c.name = std::to_string(tensors) + " x " + format_bytes(static_cast<int64_t>(bytes));
  c.bytes.assign(tensors, bytes);
  for (std::size_t i = tensors; i-- > 0;) c.order.push_back(i);
  return c;
}

void check_status(const Status& status) {
  if (!status.is_ok()) throw std::runtime_error(status.message());
}

// Bytes of `actual` that differ from `expected`.
int64_t count_different(const std::vector<unsigned char>& expected,
                        const std::vector<unsigned char>& actual) {
  int64_t wrong = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) wrong += expected[i] != actual[i] ? 1 : 0;
  return wrong;
}

// Runs one case and prints its rows; returns the wrong bytes of pack and
// unpack.
int64_t run_case(const FusionCase& c, const FusionBenchOptions& options, const Device& device,
                 cudaStream_t stream, const Table& table) {
  std::vector<std::size_t> offsets(c.bytes.size());
  std::size_t total = 0;
  for (std::size_t i = 0; i < c.bytes.size(); ++i) {
    offsets[i] = total;
    total += c.bytes[i];
  }
  std::vector<unsigned char> host(total);
  std::mt19937_64 rng(total);
  for (unsigned char& b : host) b = static_cast<unsigned char>(rng());
  std::vector<unsigned char> packed_expected(total);
  const auto bytes = static_cast<int64_t>(total);
  Tensor input(DataType::kUInt8, {bytes}, device);
  Tensor fusion(DataType::kUInt8, {bytes}, device);
  Tensor output(DataType::kUInt8, {bytes}, device);
  copy_to_device(input.data(), host.data(), total, stream);
  auto* in = static_cast<unsigned char*>(input.data());
  auto* fused = static_cast<unsigned char*>(fusion.data());
  auto* out = static_cast<unsigned char*>(output.data());

  std::vector<ops::cuda::CopyTask> pack, unpack;
  std::size_t position = 0;
  for (const std::size_t i : c.order) {
    pack.push_back({in + offsets[i], fused + position, c.bytes[i]});
    unpack.push_back({fused + position, out + offsets[i], c.bytes[i]});
    std::memcpy(packed_expected.data() + position, host.data() + offsets[i], c.bytes[i]);
    position += c.bytes[i];
  }

  const auto row = [&](const char* path, double seconds, std::optional<int64_t> wrong) {
    Row r;
    r.bytes = bytes;
    r.count = static_cast<int64_t>(c.bytes.size());
    r.type = "uint8";
    r.path = path;
    r.time_us = seconds * 1e6;
    r.algbw_gbps = static_cast<double>(total) / seconds / 1e9;
    r.wrong = wrong;
    table.print_row(r);
    return r.algbw_gbps;
  };
  // One batched copy timed, its destination poisoned before and checked
  // after against `expected`; returns the seconds, counts the wrong bytes.
  std::vector<unsigned char> actual(total);
  const auto time_batched = [&](const std::vector<ops::cuda::CopyTask>& tasks,
                                unsigned char* destination,
                                const std::vector<unsigned char>& expected, int64_t* wrong) {
    poison_device(destination, total, stream);
    const double seconds =
        time_queued([&] { check_status(ops::cuda::batched_copy(tasks, stream)); }, options.warmup,
                    options.iterations, stream);
    copy_to_host(actual.data(), destination, total, stream);
    *wrong = count_different(expected, actual);
    return seconds;
  };
  int64_t pack_wrong = 0, unpack_wrong = 0;
  const double pack_seconds = time_batched(pack, fused, packed_expected, &pack_wrong);
  // Unpack from the packed buffer just checked.
  const double unpack_seconds = time_batched(unpack, out, host, &unpack_wrong);
  const double per_tensor_seconds = time_queued(
      [&] {
        for (const ops::cuda::CopyTask& task : pack) {
          HERD_BENCH_CUDA(cudaMemcpyAsync(task.destination, task.source, task.bytes,
                                          cudaMemcpyDeviceToDevice, stream));
        }
      },
      options.warmup, options.iterations, stream);
  const double d2d_seconds =
      time_device_copy(out, in, total, options.warmup, options.iterations, stream);

  if (!options.csv) std::printf("# case: %s, %s\n", c.name.c_str(), format_bytes(bytes).c_str());
  const double pack_gbps = row("pack", pack_seconds, pack_wrong);
  const double unpack_gbps = row("unpack", unpack_seconds, unpack_wrong);
  row("per-tensor", per_tensor_seconds, std::nullopt);
  const double d2d_gbps = row("d2d", d2d_seconds, std::nullopt);
  if (!options.csv) {
    std::printf("# %s: pack %.2f, unpack %.2f of the d2d copy's bandwidth\n", c.name.c_str(),
                pack_gbps / d2d_gbps, unpack_gbps / d2d_gbps);
  }
  return pack_wrong + unpack_wrong;
}

}  // namespace

int64_t run_gpu_fusion_bench(const FusionBenchOptions& options, MPI_Comm comm) {
  const GpuPlacement placement = select_gpu(comm, 0);
  int rank = 0;
  HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
  if (rank != 0) return 0;  // one GPU's kernels: rank 0 alone measures
  const Device device = Device::gpu(placement.device);
  const CudaStream stream;
  const Table table(stdout, options.csv);
  table.print_note("herd-bench fusion: GPU " + std::to_string(placement.device) + " (" +
                   placement.name + "); " + std::to_string(options.iterations) +
                   " timed calls after " + std::to_string(options.warmup) +
                   " warmup per row, CUDA events");
  table.print_note(
      "pack/unpack: ops::cuda::batched_copy of every tensor into / out of the fusion buffer "
      "(backward order), as herd's GPU executor queues it; per-tensor: one "
      "cudaMemcpyAsync per tensor; d2d: one cudaMemcpyAsync of all the bytes");
  table.print_note(
      "bytes: all tensors of the case; count: tensors; algbw: bytes / time (each byte counted "
      "once); #wrong: bytes that differ from the host's packing");
  table.print_header();
  const std::vector<FusionCase> cases = {model_case(Model::kResNet50), model_case(Model::kBertBase),
                                         uniform_case(16384, std::size_t{4} << 10),
                                         uniform_case(1024, std::size_t{64} << 10),
                                         uniform_case(64, std::size_t{1} << 20)};
  int64_t wrong = 0;
  for (const FusionCase& c : cases) wrong += run_case(c, options, device, stream.get(), table);
  return wrong;
}

}  // namespace herd::bench
