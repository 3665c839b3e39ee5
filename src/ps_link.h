// The messages between workers and parameter servers
// (include/herd/parameter_server.h): the worker's side (WorkerLink) and the
// server loop (serve).
//
// Both run on a communicator of their own, a duplicate of MPI_COMM_WORLD
// made by herd::init on every rank, with MPI_ERRORS_RETURN. A worker sends
// each request with one tag; the server handles them in arrival order and
// replies with another, so the replies from one server reach a worker in the
// order of its requests, and no message carries an id. A worker that shuts
// herd down sends each server a goodbye; a server ends once it has one from
// every worker (or found the worker's process gone).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <mpi.h>

#include "herd/parameter_server.h"

namespace herd::detail {

// The factory set by set_request_handler_factory (null until then).
ps::RequestHandlerFactory registered_request_handler_factory();
void register_request_handler_factory(ps::RequestHandlerFactory factory);

class WorkerLink {
 public:
  // `comm`: the link's communicator (a duplicate of MPI_COMM_WORLD), owned
  // from here on. `timeout_seconds`: HERD_COLLECTIVE_TIMEOUT, 0 for none.
  WorkerLink(MPI_Comm comm, const ps::Layout& layout, double timeout_seconds);
  ~WorkerLink();
  WorkerLink(const WorkerLink&) = delete;
  WorkerLink& operator=(const WorkerLink&) = delete;

  const ps::Layout& layout() const { return layout_; }
  int64_t send(int server, ps::Message request);
  ps::Message wait(int64_t id, const std::string& what);
  // Tells every server that this worker is done; waits (bounded by the
  // timeout) for the goodbyes to leave unless a fatal failure is known.
  void say_goodbye();

 private:
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    ps::Message buffer;
  };
  struct Awaited {
    int server = 0;
    bool arrived = false;
    ps::Message reply;
  };

  // Receives every reply that has arrived; true if one did. Holds mutex_.
  bool receive_arrived_locked();
  // Completes the sends that have left. Holds mutex_.
  void complete_sends_locked();
  // Announces the failure as this rank's fault and throws it.
  [[noreturn]] void fail(const std::string& what, const std::string& text);
  std::string describe_server(int server) const;

  MPI_Comm comm_;
  ps::Layout layout_;
  double timeout_seconds_;
  std::mutex mutex_;
  int64_t next_id_ = 0;
  std::map<int64_t, Awaited> awaited_;
  // Per server: the ids whose replies have not arrived, in request order.
  std::vector<std::deque<int64_t>> outstanding_;
  // Per server: when this worker last received something from it.
  std::vector<std::chrono::steady_clock::time_point> last_heard_;
  // Sends not known complete. A list: buffers never move while MPI reads them.
  std::deque<PendingSend> sends_;
  bool failed_ = false;
};

// The server loop: answers requests with `handler` until every worker has
// said goodbye or is found gone. Returns true when every worker said goodbye
// and every reply left (MPI may then be finalized). Throws herd::Error when a
// fatal failure is known (the job is failing) or the handler throws (then
// announced as this rank's fault). `comm` stays the caller's.
bool serve(MPI_Comm comm, const ps::Layout& layout, ps::RequestHandler& handler);

}  // namespace herd::detail
