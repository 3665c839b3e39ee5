// Parameter-server ranks: the low-level interface behind herd's dist_async
// KVStore (herd/kvstore.h, docs/kvstore.md). Applications use the KVStore;
// this header is for herd's KVStore library, which implements the requests
// and their handling on top of it.
//
// With HERD_NUM_SERVERS=S the last S ranks of the job are servers, the
// others workers: herd::rank() and herd::size() count the workers only, and
// every collective of herd runs among the workers. herd::init on a server
// rank never returns: it runs the server loop, which receives requests from
// the workers in arrival order, hands each to the request handler that the
// KVStore library registered, and sends back the handler's reply, all on one
// thread; once every worker has shut herd down (or ended), it shuts down and
// ends the process with status 0.
//
// A worker sends a request to server s and later waits for its reply.
// Requests from one worker to one server are handled in the order that
// worker sent them, so a pull sent after a push of the same key sees it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace herd {
namespace ps {

// The roles of the job's ranks, fixed by herd::init.
struct Layout {
  int num_workers = 1;  // ranks [0, num_workers): herd::size()
  int num_servers = 0;  // ranks [num_workers, num_workers + num_servers)
  // HERD_KVSTORE_BIGARRAY_BOUND: values of at least this many elements are
  // split over every server.
  int64_t bigarray_bound = 1000000;
  // The rank, in the whole job, of server `server` (0-based).
  int server_rank(int server) const { return num_workers + server; }
};

// On a worker, after herd::init. Throws herd::Error when herd is not running.
Layout layout();

using Message = std::vector<uint8_t>;

// Worker side: sends `request` to server `server` (0 <= server <
// num_servers) and returns its id, without waiting. Thread-safe. Throws
// herd::Error when herd is not running, the server does not exist, or a
// fatal failure is known (herd cannot continue after one).
int64_t send_request(int server, Message request);

// Waits for the reply to request `id` and returns it. Throws herd::Error,
// the message opening with `what`, when the server is gone (a process on
// this machine that no longer exists), a fatal failure is known (a peer's
// fault notice), or the server has sent nothing for HERD_COLLECTIVE_TIMEOUT
// seconds; the message names the server's rank, host and pid. Such a failure
// is fatal: it is announced to every rank (herd cannot continue after it).
// Each id is waited for once. Thread-safe.
Message wait_reply(int64_t id, const std::string& what);

// Server side: one handler per server process, called on the server loop's
// thread only.
class RequestHandler {
 public:
  virtual ~RequestHandler() = default;
  // The reply to `request` from worker `worker`. Must not throw: errors the
  // worker should see travel in the reply. An exception ends the server as a
  // fatal failure, announced to every rank.
  virtual Message handle(int worker, const Message& request) = 0;
};

// Makes the handler of server `server` (0-based) of `layout`.
using RequestHandlerFactory = std::unique_ptr<RequestHandler> (*)(const Layout& layout, int server);

// Registers how a server process makes its handler; called by herd's
// KVStore library when it is loaded. Without one, herd::init fails on every
// rank of a job with servers.
void set_request_handler_factory(RequestHandlerFactory factory);

}  // namespace ps
}  // namespace herd
