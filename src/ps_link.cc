#include "src/ps_link.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <exception>
#include <memory>
#include <type_traits>
#include <utility>

#include <fmt/format.h>

#include "collectives/mpi/fault_notice.h"
#include "collectives/mpi/mpi_check.h"
#include "collectives/mpi/peer_identity.h"
#include "collectives/poll_backoff.h"
#include "common/logging.h"
#include "herd/error.h"

namespace herd::detail {
namespace {

constexpr int kRequestTag = 1;
constexpr int kReplyTag = 2;
constexpr int kGoodbyeTag = 3;

std::atomic<ps::RequestHandlerFactory> g_factory{nullptr};

using Clock = std::chrono::steady_clock;

// Keeps `buffers` that MPI may still read (sends posted to a peer that is
// gone or frozen) for the life of the process, reachable.
template <typename Buffers>
void keep_for_life(Buffers&& buffers) {
  static std::mutex mutex;
  static auto* const kept = new std::vector<std::shared_ptr<void>>;
  std::lock_guard<std::mutex> lock(mutex);
  kept->push_back(std::make_shared<std::decay_t<Buffers>>(std::move(buffers)));
}

double seconds_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

// Receives the message that MPI_Improbe matched into `out`.
Status receive_matched(MPI_Message* message, MPI_Status* status, ps::Message* out) {
  int count = 0;
  HERD_MPI_RETURN_IF_ERROR(MPI_Get_count(status, MPI_BYTE, &count));
  out->resize(static_cast<std::size_t>(std::max(count, 0)));
  return HERD_MPI_STATUS(MPI_Mrecv(out->data(), count, MPI_BYTE, message, MPI_STATUS_IGNORE));
}

}  // namespace

ps::RequestHandlerFactory registered_request_handler_factory() { return g_factory.load(); }

void register_request_handler_factory(ps::RequestHandlerFactory factory) {
  g_factory.store(factory);
}

WorkerLink::WorkerLink(MPI_Comm comm, const ps::Layout& layout, double timeout_seconds)
    : comm_(comm),
      layout_(layout),
      timeout_seconds_(timeout_seconds),
      outstanding_(static_cast<std::size_t>(layout.num_servers)),
      last_heard_(static_cast<std::size_t>(layout.num_servers), Clock::now()) {}

WorkerLink::~WorkerLink() {
  // After a failure sends may still be pending on the communicator, and MPI
  // is not finalized anyway: keep both.
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_ || collectives::fault_known()) {
    keep_for_life(std::move(sends_));
    return;
  }
  HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&comm_));
}

std::string WorkerLink::describe_server(int server) const {
  return fmt::format("parameter server {} ({})", server,
                     collectives::describe_rank(layout_.server_rank(server)));
}

void WorkerLink::fail(const std::string& what, const std::string& text) {
  failed_ = true;
  const std::string fault = collectives::announce_fault(text);
  throw Error(fmt::format("{}: {}", what, fault));
}

int64_t WorkerLink::send(int server, ps::Message request) {
  if (server < 0 || server >= layout_.num_servers) {
    throw Error(
        fmt::format("herd::ps::send_request: there is no parameter server {}; the job has "
                    "{} (HERD_NUM_SERVERS)",
                    server, layout_.num_servers));
  }
  if (request.size() > static_cast<std::size_t>(INT_MAX)) {
    throw Error(fmt::format(
        "herd::ps::send_request: a request of {} bytes to {} is larger than one MPI message "
        "allows ({} bytes); split the value over more servers (HERD_NUM_SERVERS)",
        request.size(), describe_server(server), INT_MAX));
  }
  if (const std::optional<std::string> fault = collectives::known_fault()) {
    throw Error(fmt::format(
        "herd::ps::send_request: herd stopped after a fatal failure and cannot continue ({})",
        *fault));
  }
  std::lock_guard<std::mutex> lock(mutex_);
  sends_.push_back(PendingSend{MPI_REQUEST_NULL, std::move(request)});
  PendingSend& pending = sends_.back();
  const Status sent = HERD_MPI_STATUS(
      MPI_Isend(pending.buffer.data(), static_cast<int>(pending.buffer.size()), MPI_BYTE,
                layout_.server_rank(server), kRequestTag, comm_, &pending.request));
  if (!sent.is_ok()) {
    fail("herd::ps::send_request", fmt::format("sending a request to {} failed: {}",
                                               describe_server(server), sent.message()));
  }
  const int64_t id = next_id_++;
  awaited_[id] = Awaited{server, false, {}};
  outstanding_[static_cast<std::size_t>(server)].push_back(id);
  return id;
}

bool WorkerLink::receive_arrived_locked() {
  bool any = false;
  for (;;) {
    int arrived = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    const Status probed =
        HERD_MPI_STATUS(MPI_Improbe(MPI_ANY_SOURCE, kReplyTag, comm_, &arrived, &message, &status));
    if (!probed.is_ok()) {
      fail("herd::ps::wait_reply",
           fmt::format("receiving from the parameter servers failed: {}", probed.message()));
    }
    if (!arrived) return any;
    const int server = status.MPI_SOURCE - layout_.num_workers;
    ps::Message reply;
    const Status received = receive_matched(&message, &status, &reply);
    if (!received.is_ok() || server < 0 || server >= layout_.num_servers ||
        outstanding_[static_cast<std::size_t>(server)].empty()) {
      fail("herd::ps::wait_reply",
           fmt::format("an unexpected message from rank {}: {}", status.MPI_SOURCE,
                       received.is_ok() ? "no request to it is outstanding" : received.message()));
    }
    std::deque<int64_t>& queue = outstanding_[static_cast<std::size_t>(server)];
    Awaited& awaited = awaited_[queue.front()];
    queue.pop_front();
    awaited.arrived = true;
    awaited.reply = std::move(reply);
    last_heard_[static_cast<std::size_t>(server)] = Clock::now();
    any = true;
  }
}

void WorkerLink::complete_sends_locked() {
  while (!sends_.empty()) {
    int done = 0;
    if (MPI_Test(&sends_.front().request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done) {
      return;
    }
    sends_.pop_front();
  }
}

ps::Message WorkerLink::wait(int64_t id, const std::string& what) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto found = awaited_.find(id);
  if (found == awaited_.end()) {
    throw Error(fmt::format("{}: no reply is awaited for request {}", what, id));
  }
  const int server = found->second.server;
  const Clock::time_point started = Clock::now();
  collectives::PollBackoff backoff;
  for (;;) {
    const bool progress = receive_arrived_locked();
    Awaited& awaited = awaited_[id];
    if (awaited.arrived) {
      ps::Message reply = std::move(awaited.reply);
      awaited_.erase(id);
      complete_sends_locked();
      return reply;
    }
    complete_sends_locked();
    if (progress) {
      backoff.after_progress();
      continue;
    }
    lock.unlock();
    const bool sleeping = backoff.after_fruitless_poll();
    lock.lock();
    if (!sleeping) continue;
    if (const std::optional<std::string> fault = collectives::known_fault()) {
      failed_ = true;
      throw Error(fmt::format("{}: herd stopped after a fatal failure: {}", what, *fault));
    }
    if (collectives::peer_process_gone(comm_, layout_.server_rank(server))) {
      fail(what, fmt::format("{} is gone: its process has ended", describe_server(server)));
    }
    const Clock::time_point now = Clock::now();
    const double silent =
        seconds_between(std::max(started, last_heard_[static_cast<std::size_t>(server)]), now);
    if (timeout_seconds_ > 0 && silent > timeout_seconds_) {
      fail(what, fmt::format("{} has not answered for {:.1f} s (HERD_COLLECTIVE_TIMEOUT={})",
                             describe_server(server), silent, timeout_seconds_));
    }
  }
}

void WorkerLink::say_goodbye() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  std::vector<MPI_Request> requests(static_cast<std::size_t>(layout_.num_servers),
                                    MPI_REQUEST_NULL);
  for (int server = 0; server < layout_.num_servers; ++server) {
    HERD_MPI_WARN_IF_ERROR(MPI_Isend(nullptr, 0, MPI_BYTE, layout_.server_rank(server), kGoodbyeTag,
                                     comm_, &requests[static_cast<std::size_t>(server)]));
  }
  // Empty messages leave at once. A server that is gone or does not take
  // one within the timeout is a fault: MPI_Finalize would wait for it.
  const Clock::time_point started = Clock::now();
  collectives::PollBackoff backoff;
  for (;;) {
    int done = 0;
    if (MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done,
                    MPI_STATUSES_IGNORE) != MPI_SUCCESS ||
        done) {
      break;
    }
    if (!backoff.after_fruitless_poll()) continue;
    if (collectives::fault_known()) {
      failed_ = true;
      break;
    }
    for (int server = 0; server < layout_.num_servers && !failed_; ++server) {
      if (requests[static_cast<std::size_t>(server)] == MPI_REQUEST_NULL) continue;
      const double waited = seconds_between(started, Clock::now());
      if (collectives::peer_process_gone(comm_, layout_.server_rank(server))) {
        failed_ = true;
        collectives::announce_fault(
            fmt::format("at shutdown: {} is gone: its process has ended", describe_server(server)));
      } else if (timeout_seconds_ > 0 && waited > timeout_seconds_) {
        failed_ = true;
        collectives::announce_fault(
            fmt::format("at shutdown: {} has not taken this worker's goodbye for {:.1f} s "
                        "(HERD_COLLECTIVE_TIMEOUT={})",
                        describe_server(server), waited, timeout_seconds_));
      }
    }
    if (failed_) break;  // the sends stay posted: the communicator stays too
  }
  complete_sends_locked();
}

bool serve(MPI_Comm comm, const ps::Layout& layout, ps::RequestHandler& handler) {
  bool clean = true;  // every worker said goodbye
  const auto num_workers = static_cast<std::size_t>(layout.num_workers);
  std::vector<bool> done(num_workers, false);
  std::size_t num_done = 0;
  // Replies not known sent. A list: buffers never move while MPI reads them.
  std::deque<std::pair<MPI_Request, ps::Message>> replies;
  collectives::PollBackoff backoff;
  const auto complete_replies = [&] {
    while (!replies.empty()) {
      int sent = 0;
      if (MPI_Test(&replies.front().first, &sent, MPI_STATUS_IGNORE) != MPI_SUCCESS || !sent) {
        return;
      }
      replies.pop_front();
    }
  };
  while (num_done < num_workers) {
    int arrived = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status;
    throw_if_failed(HERD_MPI_STATUS(
        MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm, &arrived, &message, &status)));
    if (arrived) {
      backoff.after_progress();
      const int worker = status.MPI_SOURCE;
      ps::Message request;
      throw_if_failed(receive_matched(&message, &status, &request));
      if (worker < 0 || static_cast<std::size_t>(worker) >= num_workers) {
        HERD_LOG(kWarning, "parameter server: ignoring a message from rank {}, not a worker",
                 worker);
        continue;
      }
      if (status.MPI_TAG == kGoodbyeTag) {
        if (!done[static_cast<std::size_t>(worker)]) ++num_done;
        done[static_cast<std::size_t>(worker)] = true;
        continue;
      }
      ps::Message reply;
      try {
        reply = handler.handle(worker, request);
      } catch (const std::exception& error) {
        const std::string fault = collectives::announce_fault(
            fmt::format("the parameter server's request handler failed: {}", error.what()));
        throw Error(fault);
      }
      replies.emplace_back(MPI_REQUEST_NULL, std::move(reply));
      auto& [request_handle, buffer] = replies.back();
      throw_if_failed(
          HERD_MPI_STATUS(MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_BYTE,
                                    worker, kReplyTag, comm, &request_handle)));
      complete_replies();
      continue;
    }
    complete_replies();
    if (!backoff.after_fruitless_poll()) continue;
    if (const std::optional<std::string> fault = collectives::known_fault()) {
      // A reply may still be posted to a worker that is gone: keep its buffer.
      keep_for_life(std::move(replies));
      throw Error(fmt::format("the job failed: {}", *fault));
    }
    for (std::size_t worker = 0; worker < num_workers; ++worker) {
      if (!done[worker] && collectives::peer_process_gone(comm, static_cast<int>(worker))) {
        HERD_LOG(kWarning, "parameter server: worker {} ended without shutting herd down",
                 collectives::describe_rank(static_cast<int>(worker)));
        done[worker] = true;
        ++num_done;
        clean = false;
      }
    }
  }
  // A worker says goodbye after its last reply arrived, so the replies have
  // left, unless their worker was found gone.
  const Clock::time_point ended = Clock::now();
  while (!replies.empty() && seconds_between(ended, Clock::now()) < 5.0) {
    complete_replies();
    if (!replies.empty()) backoff.after_fruitless_poll();
  }
  if (!replies.empty()) {
    keep_for_life(std::move(replies));
    return false;
  }
  return clean;
}

}  // namespace herd::detail
