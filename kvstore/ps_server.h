// The parameter server's side of the dist_async KVStore: the request
// handler that herd's server loop (herd/parameter_server.h) runs on every
// server rank, registered when herd's KVStore library is loaded.
//
// Per store (numbered by the workers in creation order): an UpdateStore of
// the key slices this server owns, the optimizer sent by worker 0, and the
// count of pushes applied. Requests run one at a time on the server loop's
// thread, so no two updates touch a value at once, as upstream's executor.
#pragma once

#include <memory>

#include "herd/parameter_server.h"

namespace herd {
namespace kv {
namespace detail {

std::unique_ptr<ps::RequestHandler> make_ps_request_handler(const ps::Layout& layout, int server);

}  // namespace detail
}  // namespace kv
}  // namespace herd
