// The dist_async engine: workers push to parameter-server ranks, which apply
// each push as it arrives (docs/kvstore.md, "Parameter servers").
#pragma once

#include <memory>
#include <string>

#include "kvstore/engine.h"

namespace herd {
namespace kv {

// Makes the engine of a "dist_async" store (`type` is the lower-cased name).
// Needs herd::init() first and parameter-server ranks in the job.
std::unique_ptr<detail::Engine> make_dist_async_engine(const std::string& type);

}  // namespace kv
}  // namespace herd
