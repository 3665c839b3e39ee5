// Which GPU sums each key's GPU values on a device type: MXNet's placement of
// the device store's merge buffers. Keys are placed in batches: the first push
// of a key with GPU values places every initialised key that has no merge GPU
// yet, largest first (element count, descending; ties in init order), each on
// the GPU with the fewest elements placed so far among the GPUs that push's
// values live on (ties: the lowest index). A key keeps its GPU afterwards.
// Pure bookkeeping, no CUDA: the same in every build.
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace herd {
namespace kv {
namespace detail {

class MergePlacement {
 public:
  // Records a key (at init) with its element count.
  void add_key(int64_t id, int64_t elements);
  // The merge GPU of a recorded key, placing the waiting keys first when it
  // has none; `gpus` (non-empty, ascending, distinct) are the GPUs of the
  // push's values.
  int gpu_of(int64_t id, const std::vector<int>& gpus);
  // The elements placed on `gpu` so far.
  int64_t elements_on(int gpu) const;

 private:
  std::vector<std::pair<int64_t, int64_t>> waiting_;  // (id, elements), init order
  std::map<int64_t, int> placed_;                     // id -> GPU
  std::map<int, int64_t> load_;                       // GPU -> elements
};

}  // namespace detail
}  // namespace kv
}  // namespace herd
