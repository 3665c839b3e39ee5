// The engines behind create() (include/herd/kvstore.h), one per store type.
// Each takes the lower-cased type name, which its messages and its
// collectives' names use.
#pragma once

#include <memory>
#include <string>

#include "kvstore/engine.h"

namespace herd {
namespace kv {
namespace detail {

// local and device: the store lives in this process; no communication.
std::unique_ptr<Engine> make_local_engine(const std::string& type);

// dist_sync and dist_device_sync: a replica on every worker, updated from
// herd's allreduce of the pushes. `store_number` makes the collectives' names
// unique per store (every worker numbers its stores in creation order).
std::unique_ptr<Engine> make_dist_sync_engine(const std::string& type, int store_number);

// horovod: pushpull is an allreduce(sum), broadcast is herd's broadcast; no
// store and no optimizer.
std::unique_ptr<Engine> make_horovod_engine(int store_number);

}  // namespace detail
}  // namespace kv
}  // namespace herd
