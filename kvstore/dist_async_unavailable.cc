// dist_async in a build without the parameter-server engine: create()
// refuses the type by name.
#include <fmt/format.h>

#include "herd/error.h"
#include "kvstore/dist_async_engine.h"

namespace herd {
namespace kv {

std::unique_ptr<detail::Engine> make_dist_async_engine(const std::string& type) {
  throw Error(fmt::format(
      "kvstore '{}': this build of herd has no parameter-server engine; use dist_sync", type));
}

}  // namespace kv
}  // namespace herd
