// kvstore/gpu_merge.h in a build without CUDA: there is no GPU side, and the
// facade refuses GPU views.
#include "kvstore/gpu_merge.h"

namespace herd {
namespace kv {
namespace detail {

std::unique_ptr<GpuMerge> make_gpu_merge() { return nullptr; }

}  // namespace detail
}  // namespace kv
}  // namespace herd
