// JoinState: herd::join for one process set, on one member rank.
//
// A rank that has run out of work joins: from the next cycle it takes part in
// the other ranks' allreduces with the identity of each op (a stand-in entry
// for each tensor it never submitted), until every rank has joined; the join
// then completes on every rank with the global rank that joined last. While
// ranks are joined only allreduce and grouped allreduce run: anything else
// would wait for the joined ranks for ever, so it fails.
//
// BackgroundLoop owns one. request() and requested() are called from any
// thread; everything else only by the thread running a cycle (under the
// loop's cycle lock).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "src/handle_state.h"
#include "src/message.h"
#include "src/response_cache.h"
#include "src/tensor_queue.h"

namespace herd::detail {

class JoinState {
 public:
  // `set_rank` is this rank's position in the set; `global_ranks` names the
  // set's members by global rank, for the last rank and for messages.
  JoinState(int set_rank, std::vector<int> global_ranks);

  // herd::join on this rank: `handle` completes once every rank has joined,
  // and *last_rank (if not null) then holds the global rank that joined last.
  // Returns false, with `handle` failed, while an earlier join of this rank
  // is still waiting: one join at a time per rank.
  bool request(const std::shared_ptr<HandleState>& handle, int* last_rank);
  // This rank has asked to join and the join has not completed.
  bool requested() const { return requested_.load(); }

  // Reads requested() for the cycle that starts: the whole cycle must see one
  // answer, whatever the application thread does meanwhile. Returns it.
  bool begin_cycle();
  bool joined_this_cycle() const { return joined_this_cycle_; }

  enum class Progress {
    kUnchanged,  // the same ranks have joined as at the last agreement
    kChanged,    // other ranks have joined than at the last agreement
    kAllJoined,  // every rank has joined: the join completed, none is joined now
  };
  // Takes the set ranks that have joined by this cycle's agreement
  // (ascending). When they are all the ranks, completes this rank's join with
  // the last to join: the highest of those that were not joined at the
  // previous agreement.
  Progress agree(const std::vector<int>& joined_ranks);
  // Set ranks joined at the last agreement, ascending.
  const std::vector<int>& joined_ranks() const { return joined_ranks_; }

  // The cache slots a joined rank declares ready: every cached allreduce, so
  // that the ranks still running decide alone which of them go.
  std::vector<uint32_t> joinable_slots(const ResponseCache& cache) const;

  // While ranks are joined, the error for a submitted operation that cannot
  // run without them, naming it and the joined ranks; OK otherwise.
  Status check_runs_while_joined(const TensorEntry& entry) const;

  // A joined rank's stand-in for a tensor it never submitted: owned storage
  // holding the identity of the response's op, and no handle.
  TensorEntry stand_in_entry(const Response& response) const;

  // The loop has stopped: a waiting join fails with "join: <reason>".
  void fail(const std::string& reason);

 private:
  const int set_rank_;
  const std::vector<int> global_ranks_;
  std::atomic<bool> requested_{false};
  bool joined_this_cycle_ = false;
  std::mutex mutex_;  // guards handle_ and last_rank_
  std::shared_ptr<HandleState> handle_;
  int* last_rank_ = nullptr;
  std::vector<int> joined_ranks_;
};

}  // namespace herd::detail
