// In-process fabric: threads play ranks; see inproc_transport.h.
//
// Each rank's Transport is used by that rank's thread only; the shared State
// is guarded by one mutex, with one condition variable per destination rank.
//
// Matching: a mailbox holds the messages from one src to one dst with one
// tag. A send takes the next send ticket of its mailbox and files its bytes
// under it; a receive takes the next receive ticket when it is posted and, in
// wait(), takes the message filed under that same ticket. So messages match
// receives in the order both were posted, whatever order the receives are
// waited in.
#include "collectives/inproc/inproc_transport.h"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "common/enforce.h"

namespace herd::collectives {

namespace {

struct Mailbox {
  int64_t next_send_ticket = 0;
  int64_t next_receive_ticket = 0;
  std::map<int64_t, std::vector<unsigned char>> messages;  // by send ticket
};

// (src, dst, tag)
using MailboxKey = std::tuple<int, int, int>;

}  // namespace

struct InprocFabric::State {
  State(int size, std::chrono::milliseconds receive_timeout)
      : size(size), receive_timeout(receive_timeout), arrived(static_cast<std::size_t>(size)) {}

  const int size;
  const std::chrono::milliseconds receive_timeout;
  std::mutex mutex;
  std::vector<std::condition_variable> arrived;  // by dst rank
  std::map<MailboxKey, Mailbox> mailboxes;       // guarded by mutex
};

namespace {

using State = InprocFabric::State;

class DoneTransfer final : public PendingTransfer {
 public:
  explicit DoneTransfer(Status status) : status_(std::move(status)) {}
  Status wait() override { return status_; }

 private:
  Status status_;
};

// A receive of `bytes_` bytes into `data_` holding ticket `ticket_` of the
// (src_, dst_, tag_) mailbox.
class InprocReceive final : public PendingTransfer {
 public:
  InprocReceive(std::shared_ptr<State> state, void* data, std::size_t bytes, int src, int dst,
                int tag, int64_t ticket)
      : state_(std::move(state)),
        data_(data),
        bytes_(bytes),
        src_(src),
        dst_(dst),
        tag_(tag),
        ticket_(ticket) {}

  ~InprocReceive() override {
    if (!waited_) (void)wait();
  }

  Status wait() override {
    if (waited_) return status_;
    waited_ = true;
    status_ = take();
    return status_;
  }

 private:
  Status take() {
    std::unique_lock<std::mutex> lock(state_->mutex);
    Mailbox& mailbox = state_->mailboxes[MailboxKey(src_, dst_, tag_)];
    const bool arrived = state_->arrived[static_cast<std::size_t>(dst_)].wait_for(
        lock, state_->receive_timeout, [&] { return mailbox.messages.count(ticket_) != 0; });
    if (!arrived) {
      return Status::error(fmt::format(
          "inproc receive timed out after {} ms waiting for a message from rank {} to rank {} "
          "with tag {} ({} bytes expected)",
          state_->receive_timeout.count(), src_, dst_, tag_, bytes_));
    }
    auto message = mailbox.messages.find(ticket_);
    std::vector<unsigned char> payload = std::move(message->second);
    mailbox.messages.erase(message);
    lock.unlock();
    if (payload.size() != bytes_) {
      return Status::error(fmt::format(
          "inproc receive from rank {} to rank {} with tag {}: expected {} bytes, got a message "
          "of {} bytes",
          src_, dst_, tag_, bytes_, payload.size()));
    }
    if (bytes_ > 0) std::memcpy(data_, payload.data(), bytes_);
    return Status::ok();
  }

  std::shared_ptr<State> state_;
  void* data_;
  std::size_t bytes_;
  int src_;
  int dst_;
  int tag_;
  int64_t ticket_;
  bool waited_ = false;
  Status status_;
};

class InprocTransport final : public Transport {
 public:
  InprocTransport(std::shared_ptr<State> state, int rank) : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size; }

  // Eager: the bytes are copied into the mailbox now, so the send is done.
  std::unique_ptr<PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                         int tag) override {
    if (Status status = check_peer("send to", peer); !status.is_ok()) {
      return std::make_unique<DoneTransfer>(status);
    }
    const auto* first = static_cast<const unsigned char*>(data);
    std::vector<unsigned char> payload(first, first + bytes);
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      Mailbox& mailbox = state_->mailboxes[MailboxKey(rank_, peer, tag)];
      mailbox.messages.emplace(mailbox.next_send_ticket++, std::move(payload));
    }
    state_->arrived[static_cast<std::size_t>(peer)].notify_all();
    return std::make_unique<DoneTransfer>(Status::ok());
  }

  std::unique_ptr<PendingTransfer> irecv(void* data, std::size_t bytes, int peer,
                                         int tag) override {
    if (Status status = check_peer("receive from", peer); !status.is_ok()) {
      return std::make_unique<DoneTransfer>(status);
    }
    int64_t ticket = 0;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      ticket = state_->mailboxes[MailboxKey(peer, rank_, tag)].next_receive_ticket++;
    }
    return std::make_unique<InprocReceive>(state_, data, bytes, peer, rank_, tag, ticket);
  }

 private:
  Status check_peer(const char* direction, int peer) const {
    if (peer >= 0 && peer < state_->size) return Status::ok();
    return Status::error(fmt::format("inproc rank {}: cannot {} rank {} of a fabric of {} ranks",
                                     rank_, direction, peer, state_->size));
  }

  std::shared_ptr<State> state_;
  int rank_;
};

}  // namespace

InprocFabric::InprocFabric(int size, std::chrono::milliseconds receive_timeout)
    : state_(std::make_shared<State>(size, receive_timeout)) {
  HERD_ENFORCE_GE(size, 1);
}

InprocFabric::~InprocFabric() = default;

int InprocFabric::size() const { return state_->size; }

std::unique_ptr<Transport> InprocFabric::transport(int rank) {
  HERD_ENFORCE_GE(rank, 0);
  HERD_ENFORCE_LT(rank, state_->size);
  return std::make_unique<InprocTransport>(state_, rank);
}

// One thread per rank; each catches whatever its body throws, so that no
// exception crosses a thread, and the first one caught is rethrown here after
// every thread has been joined.
void run_inproc_ranks(int size, const std::function<void(int rank, Transport& transport)>& body) {
  InprocFabric fabric(size);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int rank = 0; rank < size; ++rank) transports.push_back(fabric.transport(rank));

  std::mutex error_mutex;
  std::exception_ptr first_error;
  std::vector<std::thread> threads;
  // Joins the threads started so far even if starting the next one throws.
  struct JoinAll {
    std::vector<std::thread>& threads;
    ~JoinAll() {
      for (auto& thread : threads) {
        if (thread.joinable()) thread.join();
      }
    }
  } join_all{threads};
  threads.reserve(static_cast<std::size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank, *transports[static_cast<std::size_t>(rank)]);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!first_error) first_error = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace herd::collectives
