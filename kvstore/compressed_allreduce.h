// The sum over workers of 2-bit (or 1-bit) compressed gradients on herd's
// collectives, for the types without servers (dist_sync, dist_device_sync).
//
// A ring cannot add codes, so every worker allgathers every worker's codes
// (bytes on the wire: num_workers * compressed_bytes per worker) and
// dequantizes them in rank order into the sum: the same floats on every
// worker, the same sum a server computes from the workers' compressed pushes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvstore/gradient_compression.h"

namespace herd {
namespace kv {
namespace detail {

struct CompressedItem {
  std::string name;   // the collective's name, unique among items in flight
  const float* grad;  // this worker's merged gradient
  float* residual;    // this worker's residual for the key (n floats)
  int64_t n;
  float* sum;  // out: sum over workers of the dequantized codes
};

// Starts the allgathers of every item, then waits for them all. Collective
// over herd's global process set: every worker calls it with the same names
// and sizes in the same order.
void compressed_allreduce(const CompressionParams& params,
                          const std::vector<CompressedItem>& items);

}  // namespace detail
}  // namespace kv
}  // namespace herd
