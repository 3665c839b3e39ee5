// gpu_support.h for a build without CUDA: there is no GPU path.
#include "src/gpu_support.h"

namespace herd::detail {

std::unique_ptr<GpuSupport> make_gpu_support(const Config&, int, int) { return nullptr; }

}  // namespace herd::detail
