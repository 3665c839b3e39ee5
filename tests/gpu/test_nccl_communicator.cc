// NcclCommunicator (collectives/nccl) on real GPUs, under mpiexec with one GPU
// per rank (rank r uses device r % devices; ctest runs one rank, since NCCL
// refuses two ranks on one GPU). Every collective over every dtype it takes,
// sizes 0, 1, 1000 and 2^20 + 3 elements, parts equal and unequal (with
// empty ones), in place and out of place: each rank fills its buffers from a
// seeded function of (rank, index) that every rank can evaluate, so the
// expected result is computed on the host in closed form (the sum, minimum,
// maximum or product over ranks, or the bytes of the rank that owns a part).
// Also: what NCCL cannot do (int16, average, negative counts) is refused
// with an error; async_error() is ok after good work; after abort() every
// call fails with "aborted".
//
// With one rank the unequal-part paths of allgatherv and reducescatterv (one
// part is always "equal") and alltoallv's ncclSend/ncclRecv are not reached;
// run the binary under mpiexec -np N on a machine with N GPUs for those.
//
// MPI starts with the first test (MpiSession::get) and ends at exit, so a run
// without a GPU, whose main() returns 77 before any test, never touches MPI.
#include <cuda_runtime_api.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "collectives/nccl/nccl_communicator.h"
#include "common/device_memory.h"
#include "common/status.h"
#include "herd/types.h"
#include "ops/half.h"

namespace herd::collectives {
namespace {

using Bytes = std::vector<unsigned char>;

// MPI for the whole program: initialized on first use, finalized when the
// program exits (after main returns, before the CUDA runtime's own teardown,
// which was registered earlier, by main's cudaGetDeviceCount).
class MpiSession {
 public:
  static MpiSession& get() {
    static MpiSession session;
    return session;
  }
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  MpiSession() {
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      std::fprintf(stderr, "MPI_Init_thread failed\n");
      std::abort();
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiSession() { MPI_Finalize(); }

  int rank_ = 0;
  int size_ = 1;
};

// This rank's communicator over MPI_COMM_WORLD on device rank % devices, and
// a stream of that device (current from create() on).
struct Fixture {
  Fixture() : rank(MpiSession::get().rank()), size(MpiSession::get().size()) {
    int devices = 0;
    REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
    REQUIRE(devices > 0);
    device = rank % devices;
    const Status created = NcclCommunicator::create(MPI_COMM_WORLD, device, &comm);
    INFO(created.message());
    REQUIRE(created.is_ok());
    REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  }
  // The stream's NCCL kernels finish before their communicator goes, and the
  // communicator before the stream.
  ~Fixture() {
    if (stream != nullptr) (void)cudaStreamSynchronize(stream);
    comm.reset();
    if (stream != nullptr) (void)cudaStreamDestroy(stream);
  }
  Fixture(const Fixture&) = delete;
  Fixture& operator=(const Fixture&) = delete;

  void synchronize() const { REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess); }

  int rank = 0;
  int size = 1;
  int device = 0;
  std::unique_ptr<NcclCommunicator> comm;
  cudaStream_t stream = nullptr;
};

const std::vector<int64_t> kSizes = {0, 1, 1000, (int64_t{1} << 20) + 3};
const std::vector<DataType> kReducible = {
    DataType::kUInt8,   DataType::kInt8,     DataType::kInt32,   DataType::kInt64,
    DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32, DataType::kFloat64};
// The byte-moving collectives see only element sizes 1, 2, 4 and 8.
const std::vector<DataType> kMoved = {DataType::kUInt8, DataType::kInt16, DataType::kFloat32,
                                      DataType::kInt64};

// ---------------------------------------------------------------------------
// Inputs: a pseudo-random function of (seed, key, index), the key being a
// rank (or a pair of ranks), identical on every rank.

uint64_t mix(uint64_t seed, uint64_t key, uint64_t index) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ULL ^ (key + 1) * 0xC2B2AE3D27D4EB4FULL ^
               (index + 1) * 0x165667B19E3779F9ULL;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ULL;
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 32;
  return x;
}

// Byte `index` of the data that `key` owns, for the byte-moving collectives.
unsigned char byte_value(uint64_t seed, int64_t key, int64_t index) {
  return static_cast<unsigned char>(
      mix(seed, static_cast<uint64_t>(key), static_cast<uint64_t>(index)) & 0xFF);
}

// Element `index` of rank `key`'s input to a reduction: small integers, which
// every dtype holds exactly, and whose sums, products and partial results on
// up to 15 ranks do too (|sum| <= 120, |product| <= 8, bfloat16 is exact to
// 256), so every reduction order gives the same bits.
double input_value(DataType dtype, ReduceOp op, uint64_t seed, int key, int64_t index) {
  const uint64_t h = mix(seed, static_cast<uint64_t>(key), static_cast<uint64_t>(index));
  const bool is_unsigned = dtype == DataType::kUInt8;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:
      return is_unsigned ? static_cast<double>(h % 9) : static_cast<double>(h % 17) - 8;
    case ReduceOp::kMin:
    case ReduceOp::kMax:
      return is_unsigned ? static_cast<double>(h % 101) : static_cast<double>(h % 101) - 50;
    case ReduceOp::kProduct:
      if (key < 3 && h % 4 == 0) return 2;
      return is_unsigned || (h >> 8) % 2 == 0 ? 1 : -1;
    case ReduceOp::kAdasum: break;  // not a NCCL reduction
  }
  return 0;
}

double combine(ReduceOp op, double a, double b) {
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage: return a + b;
    case ReduceOp::kMin: return a < b ? a : b;
    case ReduceOp::kMax: return a > b ? a : b;
    case ReduceOp::kProduct: return a * b;
    case ReduceOp::kAdasum: break;  // not a NCCL reduction
  }
  return 0;
}

// op over ranks 0..size-1 of input_value(..., rank, index).
double reduced_value(DataType dtype, ReduceOp op, uint64_t seed, int size, int64_t index) {
  double result = input_value(dtype, op, seed, 0, index);
  for (int r = 1; r < size; ++r) {
    result = combine(op, result, input_value(dtype, op, seed, r, index));
  }
  return result;
}

template <typename T>
void store(T value, unsigned char* out) {
  std::memcpy(out, &value, sizeof value);
}

template <typename T>
T load(const unsigned char* in) {
  T value;
  std::memcpy(&value, in, sizeof value);
  return value;
}

void encode(DataType dtype, double value, unsigned char* out) {
  switch (dtype) {
    case DataType::kUInt8: store(static_cast<uint8_t>(value), out); return;
    case DataType::kInt8: store(static_cast<int8_t>(value), out); return;
    case DataType::kInt16: store(static_cast<int16_t>(value), out); return;
    case DataType::kInt32: store(static_cast<int32_t>(value), out); return;
    case DataType::kInt64: store(static_cast<int64_t>(value), out); return;
    case DataType::kFloat16: store(ops::float_to_float16(static_cast<float>(value)), out); return;
    case DataType::kBFloat16: store(ops::float_to_bfloat16(static_cast<float>(value)), out); return;
    case DataType::kFloat32: store(static_cast<float>(value), out); return;
    case DataType::kFloat64: store(value, out); return;
  }
}

double decode(DataType dtype, const unsigned char* in) {
  switch (dtype) {
    case DataType::kUInt8: return load<uint8_t>(in);
    case DataType::kInt8: return load<int8_t>(in);
    case DataType::kInt16: return load<int16_t>(in);
    case DataType::kInt32: return load<int32_t>(in);
    case DataType::kInt64: return static_cast<double>(load<int64_t>(in));
    case DataType::kFloat16: return ops::float16_to_float(load<uint16_t>(in));
    case DataType::kBFloat16: return ops::bfloat16_to_float(load<uint16_t>(in));
    case DataType::kFloat32: return load<float>(in);
    case DataType::kFloat64: return load<double>(in);
  }
  return 0;
}

// `count` elements of dtype, element i being value(i).
Bytes encoded(DataType dtype, int64_t count, const std::function<double(int64_t)>& value) {
  const std::size_t element_bytes = element_size(dtype);
  Bytes bytes(static_cast<std::size_t>(count) * element_bytes);
  for (int64_t i = 0; i < count; ++i) {
    encode(dtype, value(i), bytes.data() + static_cast<std::size_t>(i) * element_bytes);
  }
  return bytes;
}

// ---------------------------------------------------------------------------
// Device buffers and comparisons. Every upload and fill is synchronized:
// cudaMemcpy from pageable memory may return before its DMA lands, cudaMemset
// returns at once, and the collectives' non-blocking stream does not wait
// for the legacy stream both run on.

herd::detail::DeviceMemory upload(const Bytes& host, int device) {
  herd::detail::DeviceMemory memory = herd::detail::allocate(Device::gpu(device), host.size());
  if (!host.empty()) {
    REQUIRE(cudaMemcpy(memory.get(), host.data(), host.size(), cudaMemcpyHostToDevice) ==
            cudaSuccess);
  }
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return memory;
}

// `bytes` bytes of `byte` on the device: what a collective must overwrite.
herd::detail::DeviceMemory filled(std::size_t bytes, unsigned char byte, int device) {
  herd::detail::DeviceMemory memory = herd::detail::allocate(Device::gpu(device), bytes);
  REQUIRE(cudaMemset(memory.get(), byte, bytes > 0 ? bytes : 1) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  return memory;
}

Bytes download(const void* data, std::size_t bytes) {
  Bytes host(bytes);
  if (bytes > 0) {
    REQUIRE(cudaMemcpy(host.data(), data, bytes, cudaMemcpyDeviceToHost) == cudaSuccess);
  }
  return host;
}

// "" when element i of `actual` (count elements of dtype) is expected(i) for
// every i; else the first wrong one and how many are wrong.
std::string first_wrong_element(int rank, DataType dtype, const Bytes& actual, int64_t count,
                                const std::function<double(int64_t)>& expected) {
  const std::size_t element_bytes = element_size(dtype);
  if (actual.size() != static_cast<std::size_t>(count) * element_bytes) {
    return "rank " + std::to_string(rank) + ": wrong result size";
  }
  int64_t wrong = 0;
  std::ostringstream first;
  for (int64_t i = 0; i < count; ++i) {
    const double want = expected(i);
    const double got = decode(dtype, actual.data() + static_cast<std::size_t>(i) * element_bytes);
    if (got == want) continue;
    if (wrong++ == 0) {
      first << "rank " << rank << " index " << i << ": expected " << want << ", actual " << got;
    }
  }
  if (wrong == 0) return "";
  return first.str() + " (" + std::to_string(wrong) + " of " + std::to_string(count) +
         " elements wrong)";
}

// The same for bytes: byte j of `actual` must be expected(j).
std::string first_wrong_byte(int rank, const Bytes& actual,
                             const std::function<unsigned char(std::size_t)>& expected) {
  int64_t wrong = 0;
  std::ostringstream first;
  for (std::size_t j = 0; j < actual.size(); ++j) {
    const unsigned char want = expected(j);
    if (actual[j] == want) continue;
    if (wrong++ == 0) {
      first << "rank " << rank << " byte " << j << ": expected " << +want << ", actual "
            << +actual[j];
    }
  }
  if (wrong == 0) return "";
  return first.str() + " (" + std::to_string(wrong) + " of " + std::to_string(actual.size()) +
         " bytes wrong)";
}

std::vector<int64_t> offsets_of(const std::vector<int64_t>& parts) {
  std::vector<int64_t> offsets;
  int64_t total = 0;
  for (int64_t part : parts) {
    offsets.push_back(total);
    total += part;
  }
  offsets.push_back(total);  // the total, last
  return offsets;
}

// A named rule for the number of elements of part r (from rank r, or to it)
// of `n` on p ranks.
struct Pattern {
  std::string name;
  std::function<int64_t(int64_t n, int p, int r)> count;
};

// Unequal parts: with n > 0 and p > 1 some are empty and the others differ.
const std::vector<Pattern> kPatterns = {
    {"equal", [](int64_t n, int, int) { return n; }},
    {"unequal", [](int64_t n, int, int r) { return r % 3 == 1 ? int64_t{0} : n + 2 * r; }},
};

std::vector<int64_t> parts_of(const Pattern& pattern, int64_t n, int p) {
  std::vector<int64_t> parts;
  for (int r = 0; r < p; ++r) parts.push_back(pattern.count(n, p, r));
  return parts;
}

std::vector<int64_t> times(std::vector<int64_t> values, int64_t factor) {
  for (int64_t& value : values) value *= factor;
  return values;
}

// ---------------------------------------------------------------------------

TEST_CASE("create joins every rank, one GPU each", "[nccl]") {
  Fixture f;
  CHECK(f.comm->rank() == f.rank);
  CHECK(f.comm->size() == f.size);
  CHECK(f.comm->device() == f.device);
  CHECK_FALSE(f.comm->aborted());
  int current = -1;
  REQUIRE(cudaGetDevice(&current) == cudaSuccess);
  CHECK(current == f.device);
  const Status async = f.comm->async_error();
  INFO(async.message());
  CHECK(async.is_ok());
}

TEST_CASE("create fails on every rank for a device that does not exist", "[nccl]") {
  MpiSession& mpi = MpiSession::get();
  int devices = 0;
  REQUIRE(cudaGetDeviceCount(&devices) == cudaSuccess);
  std::unique_ptr<NcclCommunicator> comm;
  const Status status = NcclCommunicator::create(MPI_COMM_WORLD, devices + mpi.rank(), &comm);
  REQUIRE_FALSE(status.is_ok());
  CHECK(comm == nullptr);
  CHECK_THAT(
      status.message(),
      Catch::Contains("rank " + std::to_string(mpi.rank()) + " of " + std::to_string(mpi.size())) &&
          Catch::Contains("device " + std::to_string(devices + mpi.rank())) &&
          Catch::Contains("does not exist"));
}

TEST_CASE("can_reduce: every dtype but int16", "[nccl]") {
  for (DataType dtype : kReducible) {
    INFO(to_string(dtype));
    CHECK(NcclCommunicator::can_reduce(dtype));
  }
  CHECK_FALSE(NcclCommunicator::can_reduce(DataType::kInt16));
}

TEST_CASE("allreduce: sum, min, max and product of every dtype NCCL reduces", "[nccl]") {
  Fixture f;
  const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax,
                                     ReduceOp::kProduct};
  uint64_t seed = 1000;
  for (DataType dtype : kReducible) {
    for (ReduceOp op : ops) {
      for (int64_t count : kSizes) {
        for (bool in_place : {false, true}) {
          if (in_place && count != 1000) continue;
          ++seed;
          INFO("allreduce " << to_string(dtype) << " " << to_string(op) << " of " << count
                            << (in_place ? " elements in place" : " elements"));
          const Bytes input = encoded(
              dtype, count, [&](int64_t i) { return input_value(dtype, op, seed, f.rank, i); });
          herd::detail::DeviceMemory send = upload(input, f.device);
          herd::detail::DeviceMemory separate = filled(input.size(), 0xAB, f.device);
          void* recv = in_place ? send.get() : separate.get();
          const Status status = f.comm->allreduce(send.get(), recv, count, dtype, op, f.stream);
          INFO(status.message());
          REQUIRE(status.is_ok());
          f.synchronize();
          CHECK(first_wrong_element(
                    f.rank, dtype, download(recv, input.size()), count,
                    [&](int64_t i) { return reduced_value(dtype, op, seed, f.size, i); }) == "");
        }
      }
    }
  }
}

TEST_CASE("allgatherv: equal and unequal parts, in place and not", "[nccl]") {
  Fixture f;
  uint64_t seed = 2000;
  for (DataType dtype : kMoved) {
    const auto element_bytes = static_cast<int64_t>(element_size(dtype));
    for (const Pattern& pattern : kPatterns) {
      for (int64_t n : kSizes) {
        for (bool in_place : {false, true}) {
          if (in_place && n != 1000) continue;
          ++seed;
          INFO("allgatherv of " << to_string(dtype) << ", parts " << pattern.name << " of " << n
                                << (in_place ? " elements, in place" : " elements"));
          const std::vector<int64_t> bytes = times(parts_of(pattern, n, f.size), element_bytes);
          const std::vector<int64_t> offsets = offsets_of(bytes);
          const auto total = static_cast<std::size_t>(offsets.back());
          const auto mine = static_cast<std::size_t>(bytes[static_cast<std::size_t>(f.rank)]);
          const auto my_offset =
              static_cast<std::size_t>(offsets[static_cast<std::size_t>(f.rank)]);
          Bytes input(mine);
          for (std::size_t j = 0; j < mine; ++j)
            input[j] = byte_value(seed, f.rank, static_cast<int64_t>(j));
          herd::detail::DeviceMemory recv = filled(total, 0xAB, f.device);
          herd::detail::DeviceMemory separate = upload(input, f.device);
          auto* recv_bytes = static_cast<unsigned char*>(recv.get());
          if (in_place && mine > 0) {
            REQUIRE(cudaMemcpy(recv_bytes + my_offset, input.data(), mine,
                               cudaMemcpyHostToDevice) == cudaSuccess);
            REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
          }
          const void* send =
              in_place ? static_cast<const void*>(recv_bytes + my_offset) : separate.get();
          const Status status = f.comm->allgatherv(send, recv.get(), bytes, f.stream);
          INFO(status.message());
          REQUIRE(status.is_ok());
          f.synchronize();
          CHECK(first_wrong_byte(f.rank, download(recv.get(), total), [&](std::size_t j) {
                  int owner = 0;
                  while (static_cast<std::size_t>(offsets[static_cast<std::size_t>(owner) + 1]) <=
                         j) {
                    ++owner;
                  }
                  return byte_value(
                      seed, owner,
                      static_cast<int64_t>(j) - offsets[static_cast<std::size_t>(owner)]);
                }) == "");
        }
      }
    }
  }
}

TEST_CASE("broadcast from the first and the last rank", "[nccl]") {
  Fixture f;
  uint64_t seed = 3000;
  std::vector<int> roots = {0};
  if (f.size > 1) roots.push_back(f.size - 1);
  for (DataType dtype : kMoved) {
    for (int root : roots) {
      for (int64_t count : kSizes) {
        ++seed;
        INFO("broadcast of " << count << " " << to_string(dtype) << " from rank " << root);
        const std::size_t bytes = static_cast<std::size_t>(count) * element_size(dtype);
        // Every rank starts with different bytes; only the root's survive.
        const int key = f.rank == root ? root : 1000 + f.rank;
        Bytes input(bytes);
        for (std::size_t j = 0; j < bytes; ++j)
          input[j] = byte_value(seed, key, static_cast<int64_t>(j));
        herd::detail::DeviceMemory data = upload(input, f.device);
        const Status status = f.comm->broadcast(data.get(), bytes, root, f.stream);
        INFO(status.message());
        REQUIRE(status.is_ok());
        f.synchronize();
        CHECK(first_wrong_byte(f.rank, download(data.get(), bytes), [&](std::size_t j) {
                return byte_value(seed, root, static_cast<int64_t>(j));
              }) == "");
      }
    }
  }
}

TEST_CASE("reducescatterv: equal and unequal parts", "[nccl]") {
  Fixture f;
  const std::vector<DataType> dtypes = {DataType::kUInt8, DataType::kInt32, DataType::kBFloat16,
                                        DataType::kFloat32, DataType::kFloat64};
  const std::vector<ReduceOp> ops = {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kProduct};
  uint64_t seed = 4000;
  for (DataType dtype : dtypes) {
    const std::size_t element_bytes = element_size(dtype);
    for (ReduceOp op : ops) {
      for (const Pattern& pattern : kPatterns) {
        for (int64_t n : kSizes) {
          ++seed;
          INFO("reducescatterv " << to_string(op) << " of " << to_string(dtype) << ", parts "
                                 << pattern.name << " of " << n << " elements");
          const std::vector<int64_t> counts = parts_of(pattern, n, f.size);
          const std::vector<int64_t> offsets = offsets_of(counts);
          const Bytes input = encoded(dtype, offsets.back(), [&](int64_t j) {
            return input_value(dtype, op, seed, f.rank, j);
          });
          const int64_t mine = counts[static_cast<std::size_t>(f.rank)];
          const int64_t my_offset = offsets[static_cast<std::size_t>(f.rank)];
          const std::size_t recv_bytes = static_cast<std::size_t>(mine) * element_bytes;
          herd::detail::DeviceMemory send = upload(input, f.device);
          herd::detail::DeviceMemory recv = filled(recv_bytes, 0xAB, f.device);
          const Status status =
              f.comm->reducescatterv(send.get(), recv.get(), counts, dtype, op, f.stream);
          INFO(status.message());
          REQUIRE(status.is_ok());
          f.synchronize();
          CHECK(first_wrong_element(f.rank, dtype, download(recv.get(), recv_bytes), mine,
                                    [&](int64_t i) {
                                      return reduced_value(dtype, op, seed, f.size, my_offset + i);
                                    }) == "");
        }
      }
    }
  }
}

TEST_CASE("alltoallv: equal and unequal parts, including this rank's own", "[nccl]") {
  Fixture f;
  // Elements rank q sends rank p.
  const std::vector<Pattern> patterns = {
      {"equal", [](int64_t n, int, int) { return n; }},
      {"unequal", [](int64_t n, int q, int p) { return n / 2 + (q + 2 * p) % 3; }},
  };
  uint64_t seed = 5000;
  for (DataType dtype : kMoved) {
    const auto element_bytes = static_cast<int64_t>(element_size(dtype));
    for (const Pattern& pattern : patterns) {
      for (int64_t n : kSizes) {
        ++seed;
        INFO("alltoallv of " << to_string(dtype) << ", parts " << pattern.name << " of " << n
                             << " elements");
        // The bytes of the part from q to p are keyed by q * size + p.
        std::vector<int64_t> send_bytes;
        std::vector<int64_t> recv_bytes;
        for (int peer = 0; peer < f.size; ++peer) {
          send_bytes.push_back(pattern.count(n, f.rank, peer) * element_bytes);
          recv_bytes.push_back(pattern.count(n, peer, f.rank) * element_bytes);
        }
        const std::vector<int64_t> send_offsets = offsets_of(send_bytes);
        const std::vector<int64_t> recv_offsets = offsets_of(recv_bytes);
        Bytes input(static_cast<std::size_t>(send_offsets.back()));
        for (int peer = 0; peer < f.size; ++peer) {
          const auto p = static_cast<std::size_t>(peer);
          for (int64_t j = 0; j < send_bytes[p]; ++j) {
            input[static_cast<std::size_t>(send_offsets[p] + j)] =
                byte_value(seed, int64_t{f.rank} * f.size + peer, j);
          }
        }
        const auto total = static_cast<std::size_t>(recv_offsets.back());
        herd::detail::DeviceMemory send = upload(input, f.device);
        herd::detail::DeviceMemory recv = filled(total, 0xAB, f.device);
        const Status status =
            f.comm->alltoallv(send.get(), send_bytes, recv.get(), recv_bytes, f.stream);
        INFO(status.message());
        REQUIRE(status.is_ok());
        f.synchronize();
        CHECK(first_wrong_byte(f.rank, download(recv.get(), total), [&](std::size_t j) {
                int source = 0;
                while (static_cast<std::size_t>(
                           recv_offsets[static_cast<std::size_t>(source) + 1]) <= j) {
                  ++source;
                }
                return byte_value(
                    seed, int64_t{source} * f.size + f.rank,
                    static_cast<int64_t>(j) - recv_offsets[static_cast<std::size_t>(source)]);
              }) == "");
      }
    }
  }
}

TEST_CASE("refuses what NCCL cannot do, before calling it", "[nccl]") {
  Fixture f;
  herd::detail::DeviceMemory buffer =
      filled(std::size_t{64} * static_cast<std::size_t>(f.size) * 8, 0, f.device);
  void* data = buffer.get();
  const std::vector<int64_t> ones(static_cast<std::size_t>(f.size), 1);

  Status status = f.comm->allreduce(data, data, 4, DataType::kInt16, ReduceOp::kSum, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("int16"));

  status = f.comm->allreduce(data, data, 4, DataType::kFloat32, ReduceOp::kAverage, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("average"));

  status = f.comm->reducescatterv(data, data, ones, DataType::kInt16, ReduceOp::kSum, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("int16"));

  status =
      f.comm->reducescatterv(data, data, ones, DataType::kFloat32, ReduceOp::kAverage, f.stream);
  CHECK_FALSE(status.is_ok());

  status = f.comm->allreduce(data, data, -1, DataType::kFloat32, ReduceOp::kSum, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("negative"));

  std::vector<int64_t> negative = ones;
  negative.back() = -4;
  status = f.comm->allgatherv(data, data, negative, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("negative"));

  status =
      f.comm->reducescatterv(data, data, negative, DataType::kFloat32, ReduceOp::kSum, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("negative"));

  status = f.comm->alltoallv(data, negative, data, ones, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("negative"));

  std::vector<int64_t> too_long = ones;
  too_long.push_back(1);
  status = f.comm->allgatherv(data, data, too_long, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("one per rank"));

  // This rank sends itself 2 bytes but expects 1 from itself.
  std::vector<int64_t> twos(static_cast<std::size_t>(f.size), 2);
  status = f.comm->alltoallv(data, twos, static_cast<unsigned char*>(data) + 256, ones, f.stream);
  CHECK_FALSE(status.is_ok());

  status = f.comm->broadcast(data, 8, f.size, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("root"));

  // None of that left NCCL in a bad state.
  f.synchronize();
  status = f.comm->async_error();
  INFO(status.message());
  CHECK(status.is_ok());
  status = f.comm->allreduce(data, data, 8, DataType::kFloat32, ReduceOp::kSum, f.stream);
  INFO(status.message());
  CHECK(status.is_ok());
  f.synchronize();
}

TEST_CASE("async_error is ok after work; after abort every call fails with aborted", "[nccl]") {
  Fixture f;
  const int64_t count = 1000;
  const Bytes input = encoded(DataType::kFloat32, count,
                              [&](int64_t i) { return static_cast<double>(f.rank + i % 7); });
  herd::detail::DeviceMemory data = upload(input, f.device);
  Status status = f.comm->allreduce(data.get(), data.get(), count, DataType::kFloat32,
                                    ReduceOp::kSum, f.stream);
  INFO(status.message());
  REQUIRE(status.is_ok());
  f.synchronize();
  status = f.comm->async_error();
  INFO(status.message());
  CHECK(status.is_ok());

  f.comm->abort();
  CHECK(f.comm->aborted());
  f.comm->abort();  // idempotent
  CHECK(f.comm->aborted());

  status = f.comm->allreduce(data.get(), data.get(), count, DataType::kFloat32, ReduceOp::kSum,
                             f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("aborted"));
  status = f.comm->broadcast(data.get(), 16, 0, f.stream);
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("aborted"));
  status = f.comm->async_error();
  CHECK_FALSE(status.is_ok());
  CHECK_THAT(status.message(), Catch::Contains("aborted"));
  // The destructor, at the end of the test, must not destroy what abort freed.
}

}  // namespace
}  // namespace herd::collectives
