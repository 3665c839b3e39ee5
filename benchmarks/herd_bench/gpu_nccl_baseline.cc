// gpu_baselines.h's nccl row, for a herd-bench built with NCCL: raw
// ncclAllReduce on a communicator the benchmark makes itself, never herd's,
// so that the row shows what NCCL alone does with the same buffers.
#include <nccl.h>

#include <optional>
#include <stdexcept>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/gpu_baselines.h"

namespace herd::bench {
namespace {

// Throws std::runtime_error("<call> failed at <file>:<line>: <NCCL's text>;
// last NCCL error: ...") unless `result` is ncclSuccess.
void check_nccl(ncclResult_t result, const char* call, const char* file, int line) {
  if (result == ncclSuccess) return;
  std::string text = std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                     ncclGetErrorString(result);
  const char* last = ncclGetLastError(nullptr);
  if (last != nullptr && *last != '\0') text += "; last NCCL error: " + std::string(last);
  throw std::runtime_error(text);
}

#define HERD_BENCH_NCCL(call) check_nccl((call), #call, __FILE__, __LINE__)

// NCCL's type for `dtype`; none for int16, which NCCL lacks.
std::optional<ncclDataType_t> nccl_type(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return ncclUint8;
    case DataType::kInt8: return ncclInt8;
    case DataType::kInt32: return ncclInt32;
    case DataType::kInt64: return ncclInt64;
    case DataType::kFloat16: return ncclFloat16;
    case DataType::kBFloat16: return ncclBfloat16;
    case DataType::kFloat32: return ncclFloat32;
    case DataType::kFloat64: return ncclFloat64;
    case DataType::kInt16: return std::nullopt;
  }
  return std::nullopt;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kAverage: return ncclAvg;
    case ReduceOp::kMin: return ncclMin;
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kProduct: return ncclProd;
    case ReduceOp::kAdasum: break;  // no NCCL counterpart; the baseline does not run it
  }
  return ncclSum;
}

bool is_floating(DataType dtype) {
  return dtype == DataType::kFloat16 || dtype == DataType::kBFloat16 ||
         dtype == DataType::kFloat32 || dtype == DataType::kFloat64;
}

// "2.28.5" from ncclGetVersion's code (major * 10000 + minor * 100 + patch
// since 2.9).
std::string nccl_version() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess) return "unknown";
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." +
         std::to_string(code % 100);
}

// One communicator over the ranks of the sweep's communicator, one GPU each;
// every call waits on the stream for its result, as herd::allreduce returns
// only with the result.
class NcclBaseline : public GpuAllreduceBaseline {
 public:
  // Collective over `comm`; the rank's device must be current.
  NcclBaseline(MPI_Comm comm, cudaStream_t stream) : stream_(stream) {
    int rank = 0;
    HERD_MPI_CHECK(MPI_Comm_rank(comm, &rank));
    HERD_MPI_CHECK(MPI_Comm_size(comm, &ranks_));
    ncclUniqueId id{};
    if (rank == 0) HERD_BENCH_NCCL(ncclGetUniqueId(&id));
    HERD_MPI_CHECK(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm));
    HERD_BENCH_NCCL(ncclCommInitRank(&comm_, ranks_, id, rank));
  }
  ~NcclBaseline() override { (void)ncclCommDestroy(comm_); }
  NcclBaseline(const NcclBaseline&) = delete;
  NcclBaseline& operator=(const NcclBaseline&) = delete;

  const char* path() const override { return "nccl"; }

  std::string note() const override {
    return "nccl: ncclAllReduce (NCCL " + nccl_version() +
           ") on a communicator of the benchmark's own, then cudaStreamSynchronize; -o avg is "
           "ncclAvg";
  }

  std::string unsupported(DataType dtype, ReduceOp op) const override {
    if (!nccl_type(dtype)) return "NCCL has no " + to_string(dtype) + " type";
    // ncclAvg scales each input of a floating type by a rounded 1/p before
    // the sum: exact where p is a power of two, not in general.
    const bool power_of_two = (ranks_ & (ranks_ - 1)) == 0;
    if (op == ReduceOp::kAverage && is_floating(dtype) && !power_of_two) {
      return "ncclAvg of " + to_string(dtype) + " on " + std::to_string(ranks_) +
             " ranks is not exact (it scales each input by a rounded 1/p), which the check needs";
    }
    return "";
  }

  void allreduce(const void* input, void* output, int64_t count, DataType dtype,
                 ReduceOp op) override {
    enqueue_allreduce(input, output, count, dtype, op);
    synchronize();
  }

  void enqueue_allreduce(const void* input, void* output, int64_t count, DataType dtype,
                         ReduceOp op) override {
    HERD_BENCH_NCCL(ncclAllReduce(input, output, static_cast<std::size_t>(count), *nccl_type(dtype),
                                  nccl_op(op), comm_, stream_));
  }

  void synchronize() override { HERD_BENCH_CUDA(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_;
  int ranks_ = 1;
  ncclComm_t comm_ = nullptr;
};

}  // namespace

std::unique_ptr<GpuAllreduceBaseline> make_nccl_baseline(MPI_Comm comm,
                                                         const GpuPlacement& placement,
                                                         cudaStream_t stream,
                                                         std::string* declined) {
  if (!placement.shared.empty()) {
    *declined = placement.shared + " (NCCL needs one GPU per rank)";
    return nullptr;
  }
  return std::make_unique<NcclBaseline>(comm, stream);
}

}  // namespace herd::bench
