// The GPU side of the device types (a type whose name contains "device"):
// a push's values summed on the key's merge GPU (kvstore/merge_placement.h),
// and copies between GPU views and the store's host values, which the
// updates (herd's optimizers, UpdateStore) and dist_device_sync's allreduce
// work on.
//
// make_gpu_merge() gives the CUDA implementation (kvstore/gpu/) in a build
// with CUDA and nullptr in a CPU-only one, where the facade refuses every GPU
// view: CMake picks the file, the code has no #if.
//
// A GPU view is read or written once the work queued before the call on its
// stream (TensorView::stream; nullptr is the legacy default stream) has
// finished; an output must have no work pending on another stream. Every
// function returns when its results are in place. A CUDA failure throws
// herd::Error beginning with `what` (the operation and the key) and naming
// the GPU, the CUDA call and CUDA's error text.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "herd/types.h"

namespace herd {
namespace kv {
namespace detail {

class GpuMerge {
 public:
  virtual ~GpuMerge() = default;

  // Throws unless `view` is memory of the GPU it names, which this process
  // can use.
  virtual void check_view(const std::string& what, const TensorView& view) = 0;

  // out (host) = ((values[0] + values[1]) + values[2]) + ..., elementwise in
  // the values' dtype, each addition rounded to it (integers wrap), as
  // sum_values (kvstore/merge.h) computes on the CPU, computed on
  // gpu:merge_gpu. Each value that is not memory of the merge GPU (a host
  // value or another GPU's) is copied into a scratch buffer there first,
  // another GPU's by a peer copy. The key's buffers on the merge GPU (`id`)
  // are kept for its next push.
  virtual void sum_to_host(const std::string& what, int64_t id, int merge_gpu,
                           const std::vector<TensorView>& values, TensorView out) = 0;

  // Copies `from` into `to` (same bytes); at least one of them is a GPU view.
  virtual void copy(const std::string& what, const TensorView& from, TensorView to) = 0;
};

std::unique_ptr<GpuMerge> make_gpu_merge();

}  // namespace detail
}  // namespace kv
}  // namespace herd
