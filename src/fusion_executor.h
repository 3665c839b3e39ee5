// FusionExecutor: runs one agreed fusion group of allreduces.
//
// Called by the background thread once every rank has agreed on the group
// (same members, same order). A group of one tensor is reduced from its
// input straight into its output; a larger group is packed into the fusion
// buffer, reduced once in place and unpacked. The executor owns the fusion buffer, which grows to
// the largest group seen and never beyond HERD_FUSION_THRESHOLD.
//
// Adasum (ReduceOp::kAdasum) runs collectives/adasum.h over the transport on
// the same buffer, in place: each tensor of a fused group keeps its own
// coefficients, so fusing changes no result. As Horovod applies them, the
// prescale multiplies the inputs before the reduction and the postscale the
// result after it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "collectives/allreduce.h"
#include "collectives/hierarchical_allreduce.h"
#include "collectives/shm/shm_allreduce.h"
#include "collectives/transport.h"
#include "common/status.h"
#include "src/allreduce_chooser.h"
#include "src/config.h"
#include "src/message.h"
#include "src/tensor_queue.h"

namespace herd::detail {

// Whether this rank feeds real data into a reduction. While it has called
// herd::join, it feeds the identity of the op instead; an average still
// divides by the whole set's size.
struct Contribution {
  bool identity = false;  // this rank contributes only the identity: skip prescale
};

// The allreduce algorithm's settings (HERD_RING_SEGMENT_BYTES,
// HERD_SMALL_ALLREDUCE_BYTES), for the CPU executors and the GPU's MPI path.
collectives::AllreduceOptions allreduce_options(const Config& config);

// The shared-memory allreduce of a process set on one machine: the group
// (null: none) and the largest buffer it takes, larger ones going over the
// transport.
struct ShmPath {
  collectives::ShmAllreduceGroup* group = nullptr;
  std::size_t max_bytes = 0;
};

// Where the hierarchical allreduce starts to beat the flat algorithms over a
// network between hosts: from here on it comes first (the fixed choice takes
// it, the measured choice tries it first). Below, a call is a few messages'
// latency either way, and recursive doubling sends fewer of them
// (docs/design/hierarchical-allreduce.md, "When it runs").
constexpr std::size_t kHierarchicalAllreduceMinBytes = 64 * 1024;

// The hierarchical collectives of a process set spanning hosts with several of
// its ranks on each (collectives/hierarchical_allreduce.h,
// hierarchical_allgather.h): the group (group.local null: none); whether
// allreduces may take it (HERD_HIERARCHICAL_ALLREDUCE is not 0 and, under
// auto, the bits stay the flat algorithms'), and whether
// HERD_HIERARCHICAL_ALLREDUCE=1 makes it run every allreduce, whatever
// HERD_ALLREDUCE_ALGORITHM says (else it is a candidate like the others from
// min_bytes on); and HERD_HIERARCHICAL_ALLGATHER for the allgathers
// (src/collective_executor.h).
struct HierarchicalPath {
  collectives::HierarchicalGroup group;
  bool allreduce = true;
  bool forced = false;
  HierarchicalAllgather allgather = HierarchicalAllgather::kAuto;
  std::size_t min_bytes = kHierarchicalAllreduceMinBytes;
};

class FusionExecutor {
 public:
  // `set_id`: the process set's thread in the timeline. `algorithm`
  // (HERD_ALLREDUCE_ALGORITHM): kAuto chooses by measurement
  // (src/allreduce_chooser.h). A set has a shared-memory path (on one host)
  // or a hierarchical one (across hosts), never both.
  FusionExecutor(collectives::Transport& transport, collectives::AllreduceOptions options,
                 ShmPath shm = {}, int set_id = 0,
                 AllreduceAlgorithmSetting algorithm = AllreduceAlgorithmSetting::kAuto,
                 HierarchicalPath hierarchical = {});

  // Reduces every entry's input into its output as `spec` (dtype, op, scales)
  // says: output = postscale * reduce_op over ranks of (prescale * input),
  // with kAverage dividing the sum by the set's size together with the
  // postscale (ops::average).
  // `later_bytes`: what the caller runs right after this group, in the same
  // cycle (the shared-memory path writes outputs that will have left the
  // cache by then with streaming stores).
  [[nodiscard]] Status allreduce(const Response& spec, const std::vector<TensorEntry*>& entries,
                                 Contribution contribution = {}, std::size_t later_bytes = 0);

  // Bytes of fusion buffer currently held.
  std::size_t fusion_buffer_bytes() const { return fusion_buffer_capacity_; }

  // Autotuning (src/autotune.h) changes these between groups, on every rank
  // in the same cycle.
  void set_ring_segment_bytes(std::size_t bytes) { options_.segment_bytes = bytes; }
  std::size_t ring_segment_bytes() const { return options_.segment_bytes; }
  // Whether the set has a shared-memory allreduce, and its chunk (ShmAllreduceGroup::
  // set_short_chunk_bytes, of the hierarchical allreduce's group inside the
  // host where the set has that instead; ignored without either).
  const ShmPath& shm() const { return shm_; }
  const HierarchicalPath& hierarchical() const { return hierarchical_; }
  // The shared-memory group the chunk applies to, or null.
  collectives::ShmAllreduceGroup* shm_group() const;
  void set_shm_chunk_bytes(std::size_t bytes);
  std::size_t shm_chunk_bytes() const;

 private:
  uint8_t* fusion_buffer(std::size_t bytes);
  // Copies the entries' inputs, in order, into the fusion buffer; returns it.
  uint8_t* pack(const std::vector<TensorEntry*>& entries, std::size_t total_bytes);
  // Copies the fusion buffer back out to the entries' outputs, in order.
  void unpack(const std::vector<TensorEntry*>& entries, const uint8_t* buffer);
  // Whether the group has several entries, each reduced in place on one
  // device, each starting where the one before it in the group ends: one
  // range laid out as the fusion buffer would be.
  static bool in_place_and_contiguous(const std::vector<TensorEntry*>& entries);
  // The path of a call on `bytes` bytes under HERD_ALLREDUCE_ALGORITHM=shm,
  // and the likeliest winner under auto: shared memory where it serves the
  // size, else the hierarchical allreduce from its size on, else what the
  // size threshold picks.
  AllreducePath first_candidate(std::size_t bytes) const;
  // Whether every call takes the hierarchical allreduce.
  bool hierarchical_forced() const { return hierarchical_.forced && has_hierarchical(); }
  // Whether allreduces may take the hierarchical allreduce.
  bool has_hierarchical() const {
    return hierarchical_.allreduce && hierarchical_.group.local != nullptr;
  }
  // The flat algorithm the size threshold picks for `bytes`.
  AllreducePath flat_by_threshold(std::size_t bytes) const;
  // Runs `path` on the call's buffers.
  [[nodiscard]] Status run(AllreducePath path, const void* input, void* output, int64_t count,
                           std::size_t element_size, const ops::ReduceFn& reduce,
                           const collectives::FinishFn& finish, std::size_t later_bytes);
  // The paths a call on `bytes` bytes may take, the likelier winner first.
  std::vector<AllreducePath> candidates(std::size_t bytes) const;
  // The path of the next call on `bytes` bytes, and whether the ranks agree on
  // their measurements after it.
  AllreduceChooser::Choice choose(std::size_t bytes);
  // Runs every candidate once on a few bytes, unmeasured, before the first
  // measured call (auto only).
  [[nodiscard]] Status warm_up();
  // Every rank's measurements for the size class of `bytes`, minima over ranks.
  [[nodiscard]] Status agree(std::size_t bytes);
  [[nodiscard]] Status adasum(const Response& spec, const std::vector<TensorEntry*>& entries,
                              Contribution contribution);

  collectives::Transport& transport_;
  collectives::AllreduceOptions options_;
  ShmPath shm_;
  HierarchicalPath hierarchical_;
  int set_id_;
  AllreduceAlgorithmSetting algorithm_;
  AllreduceChooser chooser_;
  bool warmed_up_ = false;
  std::unique_ptr<uint8_t[]> fusion_buffer_;
  std::size_t fusion_buffer_capacity_ = 0;
};

}  // namespace herd::detail
