// Wire messages of the negotiation between ranks, and their byte encoding.
//
// Each cycle every rank sends the coordinator (rank 0) a RequestList of the
// tensors it newly made ready and that the response cache could not settle;
// rank 0 answers every rank with one ResponseList. Encoding is a compact
// little-endian byte string (all ranks of a job share one architecture);
// decoding checks every length and fails with a Status on a truncated or
// corrupt message, or on a tensor whose size in bytes does not fit in
// int64_t. Pure functions, tested without MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "herd/types.h"

namespace herd::detail {

enum class CollectiveType : uint8_t {
  kAllreduce,
  kAllgather,
  kBroadcast,
  kAlltoall,
  kReducescatter,
  kBarrier,
  kGroupedAllreduce,  // several tensors negotiated and reduced as one unit
};
constexpr CollectiveType kLastCollectiveType = CollectiveType::kGroupedAllreduce;

// "allreduce", "allgather", ...: the word error messages start with.
const char* to_string(CollectiveType type);

// The arguments of one named collective that a rank's Request and the
// coordinator's Response both carry, encoded in this order in both.
struct CollectiveArguments {
  std::string name;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  // The kind of memory only (index 0): each rank drives its own GPU, so the
  // ranks agree on "cpu" or "gpu", not on an ordinal.
  Device device;
  std::vector<int64_t> shape;                      // a Response: rank 0's
  int32_t root = 0;                                // broadcast
  std::vector<std::vector<int64_t>> group_shapes;  // grouped allreduce: one per member

  // Same dtype, op, scales, device, root and group shapes: the name and the
  // shape are left to the callers, which compare them each in their own way.
  bool same_except_name_and_shape(const CollectiveArguments& other) const;
  // Elements of `shape`, or of every group shape for a grouped allreduce.
  int64_t count_elements(CollectiveType collective) const;
};

// One rank's readiness for one named tensor.
struct Request : CollectiveArguments {
  int32_t rank = 0;
  CollectiveType type = CollectiveType::kAllreduce;
  std::vector<int64_t> splits;  // alltoall: rows sent to each rank

  // Same collective, dtype, op, scales, device and shape (the rank and the
  // name are not compared): what every rank must agree on.
  bool same_signature(const Request& other) const;
  int64_t num_elements() const;
};

struct RequestList {
  std::vector<Request> requests;
};

enum class ResponseType : uint8_t {
  kExecute,  // every rank agreed: execute
  kError,    // the ranks disagreed: fail every rank's handle with error_message
};

// What every rank does next with one name, decided by the coordinator (or
// replayed from the response cache) and identical on all ranks.
struct Response : CollectiveArguments {
  ResponseType type = ResponseType::kExecute;
  CollectiveType collective = CollectiveType::kAllreduce;
  // allgather: every rank's first dimension; alltoall: the p x p matrix of
  // rows, row-major, [sender * p + receiver].
  std::vector<int64_t> rank_extents;
  std::string error_message;  // kError only

  // Elements this rank's input holds (for allgather and alltoall, rank 0's).
  int64_t num_elements() const;
  std::size_t num_bytes() const;
  // True when `request` asks for exactly what this (non-error) response does.
  bool matches(const Request& request) const;
};

struct ResponseList {
  std::vector<Response> responses;
};

std::vector<uint8_t> encode(const RequestList& list);
std::vector<uint8_t> encode(const ResponseList& list);
[[nodiscard]] Status decode(const uint8_t* data, std::size_t size, RequestList* list);
[[nodiscard]] Status decode(const uint8_t* data, std::size_t size, ResponseList* list);

}  // namespace herd::detail
