// In-process control channel; see inproc_control_channel.h.
//
// The shared State holds the rounds in progress, by number, under one mutex
// with one condition variable. Each rank counts its own calls, so its k-th
// call files its part in round k; the last rank to arrive wakes the others,
// each computes its result from the parts, and the last to leave erases the
// round. Calls of different kinds meeting in one round are a bug in the
// caller: the world is aborted with both kinds named.
#include "src/inproc_control_channel.h"

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "common/enforce.h"

namespace herd::detail {
namespace {

enum class Call { kAndAllreduce, kGatherToRoot, kBroadcastFromRoot };

const char* to_string(Call call) {
  switch (call) {
    case Call::kAndAllreduce: return "and_allreduce";
    case Call::kGatherToRoot: return "gather_to_root";
    case Call::kBroadcastFromRoot: return "broadcast_from_root";
  }
  return "unknown call";
}

// One collective call of every rank. The parts are indexed by rank.
struct Round {
  Call call = Call::kAndAllreduce;
  std::vector<std::vector<uint64_t>> words;
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<bool> arrived;
  int arrivals = 0;
  int departures = 0;
};

}  // namespace

struct InprocControlWorld::State {
  State(int size, std::chrono::milliseconds timeout) : size(size), timeout(timeout) {}

  // With `mutex` held.
  void abort_locked(const std::string& reason) {
    if (aborted) return;
    aborted = true;
    abort_reason = reason;
    changed.notify_all();
  }

  const int size;
  const std::chrono::milliseconds timeout;
  std::mutex mutex;
  std::condition_variable changed;
  std::map<int64_t, Round> rounds;  // guarded by mutex
  bool aborted = false;             // guarded by mutex
  std::string abort_reason;         // guarded by mutex
};

namespace {

using State = InprocControlWorld::State;

class InprocControlChannel final : public ControlChannel {
 public:
  InprocControlChannel(std::shared_ptr<State> state, int rank)
      : state_(std::move(state)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return state_->size; }

  Status and_allreduce(std::vector<uint64_t>* words) override {
    return meet(
        Call::kAndAllreduce, [&](Round& round) { round.words[rank_] = *words; },
        [&](const Round& round, int64_t number) {
          for (int r = 0; r < state_->size; ++r) {
            if (round.words[r].size() != words->size()) {
              return Status::error(fmt::format(
                  "and_allreduce (control round {}): rank {} passed {} words, rank {} passed {}",
                  number, rank_, words->size(), r, round.words[r].size()));
            }
          }
          for (int r = 0; r < state_->size; ++r) {
            for (std::size_t i = 0; i < words->size(); ++i) (*words)[i] &= round.words[r][i];
          }
          return Status::ok();
        });
  }

  Status gather_to_root(const std::vector<uint8_t>& mine,
                        std::vector<std::vector<uint8_t>>* per_rank) override {
    return meet(
        Call::kGatherToRoot, [&](Round& round) { round.bytes[rank_] = mine; },
        [&](const Round& round, int64_t) {
          if (rank_ == 0) *per_rank = round.bytes;
          return Status::ok();
        });
  }

  Status broadcast_from_root(std::vector<uint8_t>* bytes) override {
    return meet(
        Call::kBroadcastFromRoot, [&](Round& round) { round.bytes[rank_] = *bytes; },
        [&](const Round& round, int64_t) {
          *bytes = round.bytes[0];
          return Status::ok();
        });
  }

 private:
  // Files this rank's part of its next round with `file`, waits for every
  // rank's, and computes this rank's result with `take`.
  template <typename File, typename Take>
  Status meet(Call call, File&& file, Take&& take) {
    std::unique_lock<std::mutex> lock(state_->mutex);
    const int64_t number = next_round_++;
    if (state_->aborted) return aborted(call, number);
    Round& round = state_->rounds[number];
    if (round.arrivals == 0) {
      round.call = call;
      round.words.resize(static_cast<std::size_t>(state_->size));
      round.bytes.resize(static_cast<std::size_t>(state_->size));
      round.arrived.assign(static_cast<std::size_t>(state_->size), false);
    } else if (round.call != call) {
      state_->abort_locked(fmt::format("control round {}: rank {} called {}, other ranks {}",
                                       number, rank_, to_string(call), to_string(round.call)));
      return aborted(call, number);
    }
    file(round);
    round.arrived[static_cast<std::size_t>(rank_)] = true;
    if (++round.arrivals == state_->size) state_->changed.notify_all();
    const bool in_time = state_->changed.wait_for(
        lock, state_->timeout, [&] { return round.arrivals == state_->size || state_->aborted; });
    if (round.arrivals < state_->size) {
      if (!in_time) {
        std::vector<int> missing;
        for (int r = 0; r < state_->size; ++r) {
          if (!round.arrived[static_cast<std::size_t>(r)]) missing.push_back(r);
        }
        state_->abort_locked(fmt::format(
            "rank {} waited {} ms in {} (control round {}) for ranks [{}]", rank_,
            state_->timeout.count(), to_string(call), number, fmt::join(missing, ", ")));
      }
      return aborted(call, number);
    }
    const Status status = take(round, number);
    if (++round.departures == state_->size) state_->rounds.erase(number);
    return status;
  }

  // With the mutex held, after an abort.
  Status aborted(Call call, int64_t number) const {
    return Status::error(fmt::format("rank {}: {} (control round {}) failed: {}", rank_,
                                     to_string(call), number, state_->abort_reason));
  }

  std::shared_ptr<State> state_;
  const int rank_;
  int64_t next_round_ = 0;
};

}  // namespace

InprocControlWorld::InprocControlWorld(int size, std::chrono::milliseconds timeout)
    : state_(std::make_shared<State>(size, timeout)) {
  HERD_ENFORCE_GE(size, 1);
}

InprocControlWorld::~InprocControlWorld() = default;

int InprocControlWorld::size() const { return state_->size; }

std::unique_ptr<ControlChannel> InprocControlWorld::channel(int rank) {
  HERD_ENFORCE_GE(rank, 0);
  HERD_ENFORCE_LT(rank, state_->size);
  return std::make_unique<InprocControlChannel>(state_, rank);
}

void InprocControlWorld::abort(const std::string& reason) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  state_->abort_locked(reason);
}

}  // namespace herd::detail
