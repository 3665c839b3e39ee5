// herd::ProcessSet: a subset of the job's ranks that runs collectives on its
// own.
//
// Every collective takes an optional process set (the global set, all ranks,
// by default). Each set negotiates and communicates on its own background
// thread and communicators, so a slow set never stalls another. Sets are made
// by herd::add_process_set (or HERD_PROCESS_SETS at init) and removed by
// herd::remove_process_set, both called by every rank of the job in the same
// order. A ProcessSet is a small value; copy it freely.
#pragma once

#include <algorithm>
#include <vector>

namespace herd {

class ProcessSet {
 public:
  // The global set: every rank of the job.
  ProcessSet() = default;
  ProcessSet(int id, std::vector<int> ranks) : id_(id), ranks_(std::move(ranks)) {}

  // 0 for the global set; sets made later count up from 1.
  int id() const { return id_; }
  // The member ranks, ascending; empty for the global set (all ranks).
  const std::vector<int>& ranks() const { return ranks_; }
  bool is_global() const { return id_ == 0; }
  bool includes(int rank) const {
    return is_global() || std::binary_search(ranks_.begin(), ranks_.end(), rank);
  }

 private:
  int id_ = 0;
  std::vector<int> ranks_;
};

}  // namespace herd
