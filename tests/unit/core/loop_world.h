// LoopWorld: p BackgroundLoops in one process, threads playing the ranks of
// one process set, over the in-process control channel
// (src/inproc_control_channel.h) and the in-process transport
// (collectives/inproc), each rank with its own TensorQueue, as
// ProcessSetState builds them over MPI (no GPU support, no shared memory).
//
// Tests submit on one application thread per rank (run_ranks) and check on
// the test thread afterwards: rank threads only record, since Catch2's
// assertions are not thread-safe. Every wait is bounded, and the control
// channel and the transport fail after the world's timeout, so a broken loop
// fails its test instead of hanging it.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "collectives/inproc/inproc_transport.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "herd/types.h"
#include "src/background_loop.h"
#include "src/config.h"
#include "src/control_channel.h"
#include "src/handle_state.h"
#include "src/inproc_control_channel.h"
#include "src/message.h"
#include "src/tensor_queue.h"
#include "tests/unit/core/forwarding_transport.h"

namespace herd::detail::testing {

// The global rank of set rank r in these tests: not r, so that a message
// naming a set rank where it should name a global one shows.
inline int global_rank(int set_rank) { return 10 + set_rank; }

// What the loops' pending operations fail with when the world stops them.
inline const std::string kStopReason = "the loops were stopped before the operation completed";

// Longest a test waits for one operation or for a loop to end.
constexpr std::chrono::seconds kWaitLimit{30};

// Settings of the loops: a short cycle, so that idle ranks notice another
// rank's shutdown or join quickly; no stall check unless a test sets one.
inline Config quick_config() {
  Config config;
  config.cycle_time_ms = 5.0;
  config.stall_check_seconds = 0.0;
  return config;
}

// A Transport that counts the sends of the one it wraps.
class CountingTransport final : public ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  std::unique_ptr<collectives::PendingTransfer> isend(const void* data, std::size_t bytes, int peer,
                                                      int tag) override {
    sends_.fetch_add(1);
    return ForwardingTransport::isend(data, bytes, peer, tag);
  }
  int64_t sends() const { return sends_.load(); }

 private:
  std::atomic<int64_t> sends_{0};
};

// A ControlChannel that counts the negotiations (gathers of request lists to
// rank 0) of the one it wraps.
class CountingControlChannel final : public ControlChannel {
 public:
  explicit CountingControlChannel(std::unique_ptr<ControlChannel> inner)
      : inner_(std::move(inner)) {}
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  Status and_allreduce(std::vector<uint64_t>* words) override {
    return inner_->and_allreduce(words);
  }
  Status gather_to_root(const std::vector<uint8_t>& mine,
                        std::vector<std::vector<uint8_t>>* per_rank) override {
    negotiations_.fetch_add(1);
    return inner_->gather_to_root(mine, per_rank);
  }
  Status broadcast_from_root(std::vector<uint8_t>* bytes) override {
    return inner_->broadcast_from_root(bytes);
  }
  int64_t negotiations() const { return negotiations_.load(); }

 private:
  std::unique_ptr<ControlChannel> inner_;
  std::atomic<int64_t> negotiations_{0};
};

struct WorldOptions {
  int size = 2;
  Config config = quick_config();
  // How long a rank waits in the control channel or for a message.
  std::chrono::milliseconds timeout{std::chrono::seconds(20)};
  // A rank whose loop never runs (-1: none), as if its process hung.
  int absent = -1;
};

// An entry of set rank `rank` as Runtime::make_entry builds one: `view` is
// input and output.
inline TensorEntry make_entry(CollectiveType type, int rank, const std::string& name,
                              const TensorView& view) {
  TensorEntry entry;
  entry.request.rank = rank;
  entry.request.type = type;
  entry.request.name = name;
  entry.request.dtype = view.dtype;
  entry.request.shape = view.shape;
  entry.input = view;
  entry.output = view;
  entry.handle = std::make_shared<HandleState>(fmt::format("{} '{}'", to_string(type), name));
  return entry;
}

inline TensorEntry allreduce_entry(int rank, const std::string& name, const TensorView& view,
                                   ReduceOp op = ReduceOp::kSum) {
  TensorEntry entry = make_entry(CollectiveType::kAllreduce, rank, name, view);
  entry.request.op = op;
  return entry;
}

// The outcome of a handle, or an error saying it did not complete within
// kWaitLimit.
inline Status outcome(const std::shared_ptr<HandleState>& handle) {
  if (!handle->wait_for(kWaitLimit)) {
    return Status::error(handle->description() + ": not complete after the test's time limit");
  }
  return handle->wait();
}

class LoopWorld {
 public:
  explicit LoopWorld(const WorldOptions& options)
      : options_(options),
        control_world_(options.size, options.timeout),
        fabric_(options.size, options.timeout) {
    std::vector<int> members;
    for (int r = 0; r < options.size; ++r) members.push_back(global_rank(r));
    for (int r = 0; r < options.size; ++r) {
      auto rank = std::make_unique<Rank>(global_rank(r));
      rank->control = std::make_unique<CountingControlChannel>(control_world_.channel(r));
      rank->transport = std::make_unique<CountingTransport>(fabric_.transport(r));
      rank->loop = std::make_shared<BackgroundLoop>(options.config, rank->queue, *rank->control,
                                                    *rank->transport, members, kStopReason);
      ranks_.push_back(std::move(rank));
    }
  }

  ~LoopWorld() { stop(); }
  LoopWorld(const LoopWorld&) = delete;
  LoopWorld& operator=(const LoopWorld&) = delete;

  int size() const { return options_.size; }
  BackgroundLoop& loop(int rank) { return *at(rank).loop; }
  InprocControlWorld& control_world() { return control_world_; }
  int64_t sends(int rank) { return at(rank).transport->sends(); }
  int64_t negotiations(int rank) { return at(rank).control->negotiations(); }

  // Starts every rank's background thread but the absent one's. Entries
  // submitted before are drained by each loop's first cycle.
  void start() {
    for (int r = 0; r < size(); ++r) {
      if (r == options_.absent) continue;
      Rank& rank = at(r);
      rank.ended_future = rank.ended.get_future();
      rank.thread = std::thread([&rank] {
        rank.loop->run();
        rank.ended.set_value();
      });
    }
  }

  // Queues the entry on `rank` as ProcessSetState::submit does and returns
  // its handle; a refused push completes the handle with the refusal.
  std::shared_ptr<HandleState> submit(int rank, TensorEntry entry) {
    Rank& target = at(rank);
    std::shared_ptr<HandleState> handle = entry.handle;
    handle->set_driver(target.loop);
    const Status queued = target.queue.push(std::move(entry));
    if (!queued.is_ok()) handle->complete(queued);
    return handle;
  }

  // Whether the rank's background thread has returned within kWaitLimit.
  bool loop_ended(int rank) {
    Rank& target = at(rank);
    return target.ended_future.valid() &&
           target.ended_future.wait_for(kWaitLimit) == std::future_status::ready;
  }

  // Runs body(rank) on one application thread per rank and joins them; the
  // first exception a body throws is rethrown here.
  void run_ranks(const std::function<void(int rank)>& body) {
    std::mutex error_mutex;
    std::exception_ptr first_error;
    std::vector<std::thread> threads;
    for (int r = 0; r < size(); ++r) {
      threads.emplace_back([&, r] {
        try {
          body(r);
        } catch (...) {
          std::lock_guard<std::mutex> lock(error_mutex);
          if (!first_error) first_error = std::current_exception();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    if (first_error) std::rethrow_exception(first_error);
  }

  // Asks every loop to stop and joins the background threads.
  void stop() {
    for (auto& rank : ranks_) rank->loop->request_shutdown();
    for (auto& rank : ranks_) {
      if (rank->thread.joinable()) rank->thread.join();
    }
  }

 private:
  // Declared so that the loop goes before what it refers to.
  struct Rank {
    explicit Rank(int label) : queue(label) {}
    TensorQueue queue;
    std::unique_ptr<CountingControlChannel> control;
    std::unique_ptr<CountingTransport> transport;
    std::shared_ptr<BackgroundLoop> loop;
    std::promise<void> ended;
    std::future<void> ended_future;
    std::thread thread;
  };

  Rank& at(int rank) { return *ranks_.at(static_cast<std::size_t>(rank)); }

  const WorldOptions options_;
  InprocControlWorld control_world_;
  collectives::InprocFabric fabric_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace herd::detail::testing
