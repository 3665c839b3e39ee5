// Coordinator: rank 0's table of which ranks have made which names ready.
//
// Fed, on rank 0's background thread, with every rank's RequestList each
// negotiation round; hands back one Response per name that all ranks have
// requested, in the order the names became complete. Pure logic: no MPI.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "src/message.h"

namespace herd::detail {

// The response for one name, from every rank's request (index = rank): an
// execute response when all signatures agree, else an error response whose
// message names the tensor, each field that differs and every rank's value:
//   "allreduce 'grad/fc1': shape mismatch: rank 0 [4,3], rank 1 [4,2]"
// Several differing fields are joined with "; ".
// In a process set, `rank_labels[i]` is the global rank of the set's i-th
// member, and messages name ranks by it; empty means the identity.
Response build_response(const std::vector<Request>& requests_by_rank,
                        const std::vector<int>& rank_labels = {});

class Coordinator {
 public:
  // rank_labels as in build_response: the global rank of each member.
  explicit Coordinator(int num_ranks, std::vector<int> rank_labels = {});

  // Records one request. A second request for a name that the same rank
  // already has pending here fails (the rank broke the one-pending rule).
  [[nodiscard]] Status add(const Request& request);

  // Responses for every name that all ranks have now requested, in the order
  // they became complete; those names leave the table.
  std::vector<Response> take_ready();

  // Ranks that called herd::join: from now on a name completes once every
  // other rank has requested it. An allreduce (or grouped allreduce) then
  // proceeds among the ranks that asked; any other collective gets an error
  // response naming the joined ranks.
  void set_joined(std::vector<int> joined_ranks);

  // Names requested by some ranks but not yet all.
  std::size_t num_pending() const;

 private:
  struct Entry {
    std::vector<Request> by_rank;  // by_rank[r] valid iff present[r]
    std::vector<bool> present;
    int count = 0;
    bool complete = false;  // queued in completed_
  };

  bool is_joined(int rank) const;
  void mark_if_complete(const std::string& name, Entry& entry);
  Response response_for(const Entry& entry) const;

  int label(int rank) const { return rank_labels_.empty() ? rank : rank_labels_[rank]; }

  int num_ranks_;
  std::vector<int> rank_labels_;
  std::map<std::string, Entry> table_;
  std::vector<std::string> completed_;  // in completion order
  std::vector<int> joined_;             // ascending
};

}  // namespace herd::detail
