// Allreduce through memory shared by the ranks of one machine.
//
// Called by the runtime's background thread (or the waiter driving its loop)
// with a fused buffer or one tensor, after every rank agreed to reduce it,
// when all ranks of the process set run on this machine (the group is made
// by collectives/mpi/node_shm.h; the unit tests make one over heap memory
// with threads as ranks). One thread at a time per group.
//
// Why: between processes on one machine, a ring over MPI moves every byte
// with the kernel's single copy (CMA), which pins the sender's pages and
// reads them out of memory twice per rank (once per phase). Through shared
// memory, each rank reads its input once and writes its output once; what
// the ranks exchange stays in the shared L3 cache
// (docs/design/shared-memory-allreduce.md has the measurements).
//
// Terms. Each rank owns two slots of slot_bytes in the shared area. The
// buffer is reduced one chunk at a time, a chunk being at most one slot of
// elements (shm_chunk_bytes); chunk k uses every rank's slot k mod 2. A chunk is cut into one
// share per rank, rounded up to whole cache lines (the last shares may be
// shorter or empty). For each chunk:
//   1. copy in: every rank copies the shares of its chunk of input that the
//      other ranks reduce into its slot, then publishes `arrived` = the
//      chunk's sequence number;
//   2. reduce: once every rank has arrived, rank r reduces share r of its
//      own input (read where it lies) and of the other ranks' slots into its
//      own slot in the reduction order of collectives/reduction_order.h (the
//      same for every share, chunk and call, and the one the transport's
//      algorithms use), applies `finish`, and publishes `reduced`;
//   3. copy out: once every rank has reduced, every rank copies each share
//      from the slot of the rank that reduced it into its output (with
//      streaming stores as shm_streams_output says), and in
//      ShmLineMode::kEvict then flushes the other ranks' slot lines it read
//      (in steps 2 and 3) from the caches (line_mode.h says why; rank 0
//      picks the mode of each call and publishes it with its first
//      `arrived`).
// A rank writes slot k mod 2 again only for chunk k + 2, after every rank
// arrived at chunk k + 1 and so finished copying chunk k out of it: two
// slots need no third barrier. Sequence numbers only grow over the group's
// life, so every rank must run the same allreduces in the same order.
//
// Single copy (cross-memory attach). Where the kernel lets the ranks read
// each other's memory (process_vm_readv, the probe of make_node_shm), a call
// of the sizes the group is given (kShmSingleCopyMinBytes up to
// kShmSingleCopyEndBytes by default) first has every rank publish its input
// and output addresses, and rank 0 whether the call skips the slots (when
// its output would not stream), with an `arrived` of its own. If it does,
// one chunk (kShmSingleCopyChunkBytes) at a time,
//   1. reduce: rank r reads share r of every other rank's input, a block of
//      kShmSingleCopyBlockBytes per rank at a time, into a scratch of its
//      own that stays in its L2 cache, folds it with its own input in the
//      same reduction order into share r of its own output, applies
//      `finish`, and publishes `reduced`;
//   2. copy out: once every rank has reduced, every rank reads each other
//      rank's share of the result from that rank's output straight into its
//      own output;
// and a last barrier (`arrived` again) keeps every rank in the call until no
// other rank reads its buffers. Each byte is copied once between processes
// (by the kernel) instead of into and out of a slot. In place is safe: in
// step 1 rank r writes only share r of its buffer, which no other rank reads
// before step 2; in step 2 it writes the other shares, which their owners
// read in step 1 of that chunk, before `reduced`, and nobody reads again.
// docs/design/single-copy-allreduce.md has the measurements.
//
// Direct (registered memory). A call whose input and output lie, on every
// rank, in shared buffers (shared_buffer_registry.h) of at least
// kShmDirectMinBytes, where the group has the single-copy permission, skips
// every copy between processes: each rank publishes its buffers' id, fd and
// offset with its `arrived`; each maps the others' buffers (opening
// /proc/<pid>/fd/<fd>, kept mapped per rank and fd until that fd shows
// another id or the group goes) and publishes whether it could, with a second
// `arrived`; if every rank could, then one chunk of kShmDirectChunkBytes at a
// time,
//   1. reduce: rank r folds share r of every rank's input, loaded straight
//      from the mappings, into share r of its own output, in the same
//      reduction order, applies `finish`, and publishes `reduced`;
//   2. copy out: once every rank has reduced, every rank copies each other
//      rank's share of the result from that rank's output into its own
//      (streaming stores as shm_streams_output says);
// and a last `arrived` keeps every rank in the call until no other rank reads
// its buffers. In place is safe for the reasons the single-copy path is.
// Where some rank's buffer is not registered, or some rank could not map a
// peer's, every rank takes the path it would have taken without it.
// docs/design/shared-buffers.md has the measurements.
//
// Waiting: a rank spins on the other ranks' counters (they arrive within
// microseconds when every rank has a core), then yields, then sleeps between
// looks with growing pauses (collectives/poll_backoff.h). A rank whose
// counter has not moved for `stall_timeout` (the collective timeout in herd)
// fails the call with its rank and the chunk; a rank whose process has
// exited fails it at once (checked every 100 ms while sleeping); a fault
// known to the process (ShmWaitHooks::fault) fails it too.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>
#include <sys/uio.h>

#include "collectives/allreduce.h"
#include "collectives/shm/line_mode.h"
#include "common/status.h"
#include "ops/reduce.h"

namespace herd::collectives {

// Bytes of one slot, the longest chunk: a call whose output streams
// (shm_streams_output below) comes from memory and goes back there, so it
// runs in whole slots and halves the barriers.
constexpr std::size_t kDefaultShmSlotBytes = 1 << 20;
// The chunk of every other call: short enough that a rank's slots stay in
// its 1 MiB L2 cache for a buffer reused from the cache.
constexpr std::size_t kShmShortChunkBytes = 256 * 1024;
// A call's output is copied out with streaming stores (ops/stream_copy.h)
// when the call's bytes and those its caller reduces right after it add up
// to at least this many: nobody reads that output back before that much
// other data has passed through the cache. The measurements behind both
// sizes are in docs/design/shared-memory-allreduce.md and
// docs/design/streaming-stores.md.
constexpr std::size_t kShmStreamingMinBytes = 8 << 20;
bool shm_streams_output(std::size_t bytes, std::size_t later_bytes);

// Calls of kShmSingleCopyMinBytes up to (not including) kShmSingleCopyEndBytes
// take the single-copy path where the group has it, unless rank 0's output
// streams (shm_streams_output). Below, the two system calls per peer and the
// third barrier cost more than the copies saved. A call that streams comes
// from memory and goes back there: the slot path, whose slots stay in the
// cache and whose output is written with streaming stores, moves fewer bytes
// through memory than the kernel's copies into cached lines, and the
// ResNet-50 step ran faster on it. Measured at 2 ranks on 2 cores, same-run
// medians (docs/design/single-copy-allreduce.md).
constexpr std::size_t kShmSingleCopyMinBytes = 128 * 1024;
constexpr std::size_t kShmSingleCopyEndBytes = kShmStreamingMinBytes;
// Bytes of one chunk of a single-copy call: each rank's share of it stays in
// the caches between its owner reducing it and the others reading it.
constexpr std::size_t kShmSingleCopyChunkBytes = 1 << 20;
// Bytes read from each peer at a time into a rank's scratch while reducing.
constexpr std::size_t kShmSingleCopyBlockBytes = 32 * 1024;

// The direct path (registered memory) runs for calls from kShmDirectMinBytes
// on: the smallest size whose buffers every rank publishes already (for the
// single-copy path), so that calls in unregistered memory below it pay no
// barrier more. Its chunks are long: each rank reads a peer's share of the
// result while it is still in the shared cache, and fewer chunks mean fewer
// barriers (at 2 ranks on 2 cores, chunks of 4 MiB and more ran at the
// memory-traffic floor).
constexpr std::size_t kShmDirectMinBytes = kShmSingleCopyMinBytes;
constexpr std::size_t kShmDirectChunkBytes = 4 << 20;

// How a group reads another process's memory: process_vm_readv's signature,
// so that tests can refuse or fail it.
using CrossMemoryRead = ssize_t (*)(pid_t pid, const iovec* local, unsigned long local_count,
                                    const iovec* remote, unsigned long remote_count,
                                    unsigned long flags);

// Bytes of the chunks of a call with slots of `slot_bytes`, where a call
// whose output does not stream takes chunks of at most `short_chunk_bytes`.
std::size_t shm_chunk_bytes(bool output_streams, std::size_t slot_bytes,
                            std::size_t short_chunk_bytes = kShmShortChunkBytes);

// What a group's waits learn from outside the shared memory (all optional):
// `describe` names a rank of the group for messages ("rank 1 (host h, pid
// p)"); `fault` returns a fatal failure known to the process, which ends a
// wait at once; `failed` hears of each failure a wait finds itself (a peer
// gone or timed out), to tell the other ranks.
struct ShmWaitHooks {
  std::function<std::string(int rank)> describe;
  std::function<std::optional<std::string>()> fault;
  std::function<void(const std::string& message)> failed;
};

// One rank's part of the shared area: its counters, each on a cache line of
// its own so that a rank publishing one does not disturb readers of another.
struct alignas(64) ShmCounter {
  std::atomic<uint64_t> value{0};
};
struct ShmRankControl {
  ShmCounter arrived;  // last chunk copied in
  ShmCounter reduced;  // last chunk whose share was reduced
  ShmCounter pid;      // the rank's process, for the liveness check
  ShmCounter mode;     // rank 0's: the ShmLineMode of its current call
  // Single copy: the current call's input and output, as addresses in the
  // rank's process, published before its first `arrived` of the call.
  ShmCounter input;
  ShmCounter output;
  // This control block's address in the rank's process, for the probe.
  ShmCounter self;
  // Rank 0's: 1 when its current call takes the single-copy path.
  ShmCounter single_copy;
  // Direct path: the shared buffers (shared_buffer_registry.h) holding the
  // current call's input and output: id (0 for none), fd and offset,
  // published with the addresses.
  ShmCounter input_id;
  ShmCounter input_fd;
  ShmCounter input_offset;
  ShmCounter output_id;
  ShmCounter output_fd;
  ShmCounter output_offset;
  // Direct path: the sequence number of the call's second `arrived` when
  // this rank mapped every other rank's buffers, else 0.
  ShmCounter mapped;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free,
              "the counters are shared between processes");

// Bytes of one rank's region of the shared area: its control lines and its
// two slots, each starting on a page.
std::size_t shm_region_bytes(std::size_t slot_bytes);
// The control block and slots of the region at `region` (shm_region_bytes long).
ShmRankControl* shm_region_control(void* region);
uint8_t* shm_region_slot(void* region, int slot, std::size_t slot_bytes);

class ShmAllreduceGroup {
 public:
  // `regions[j]` is rank j's region (shm_region_bytes(slot_bytes) each), as
  // mapped in this process; this rank's control block must already carry its
  // pid and zero counters before any rank starts its first allreduce.
  ShmAllreduceGroup(int rank, std::vector<void*> regions, std::size_t slot_bytes,
                    std::chrono::milliseconds stall_timeout,
                    std::optional<ShmLineMode> fixed_mode = std::nullopt);

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(controls_.size()); }
  std::size_t slot_bytes() const { return slot_bytes_; }
  // Before the first allreduce.
  void set_wait_hooks(ShmWaitHooks hooks);

  // Whether this rank can read every other rank's memory: reads each other
  // rank's control block from its process (after every rank's group is
  // made). Fails naming the first rank it cannot read and the error.
  [[nodiscard]] Status probe_single_copy() const;
  // Calls of min_bytes up to (not including) end_bytes take the single-copy
  // path; by default none. Every rank must set the same sizes, before a call.
  void set_single_copy_bytes(std::size_t min_bytes, std::size_t end_bytes) {
    single_copy_min_bytes_ = min_bytes;
    single_copy_end_bytes_ = end_bytes;
  }
  std::size_t single_copy_min_bytes() const { return single_copy_min_bytes_; }
  std::size_t single_copy_end_bytes() const { return single_copy_end_bytes_; }
  // Calls of min_bytes and more whose buffers are registered on every rank
  // take the direct path; by default none (SIZE_MAX). Needs the permission
  // probe_single_copy checks. Every rank must set the same, before a call.
  void set_direct_min_bytes(std::size_t min_bytes) { direct_min_bytes_ = min_bytes; }
  std::size_t direct_min_bytes() const { return direct_min_bytes_; }
  // The chunk of a call whose output does not stream (kShmShortChunkBytes
  // by default; autotuning changes it, src/autotune.h), a multiple of the
  // cache line. Every rank must set the same, between calls.
  void set_short_chunk_bytes(std::size_t bytes);
  std::size_t short_chunk_bytes() const { return short_chunk_bytes_; }
  // Tests: reads other processes' memory with `read` instead of
  // process_vm_readv (the probe and the single-copy path).
  void set_cross_memory_read(CrossMemoryRead read) { read_ = read; }

  // Reduces input (count elements of element_size bytes) over the group into
  // output, like collectives::allreduce: input == output is in place, else
  // they must not overlap. `finish` (if set) is applied once to every element
  // of the result. `later_bytes`: what the caller reduces right after this
  // call (shm_streams_output; ranks may differ in it). Fails naming the rank
  // that did not arrive, or exited.
  [[nodiscard]] Status allreduce(const void* input, void* output, int64_t count,
                                 std::size_t element_size, const ops::ReduceFn& reduce,
                                 const FinishFn& finish = {}, std::size_t later_bytes = 0);

  // Every rank's block of `buffer` ends up in every rank's buffer: rank j's
  // block is bytes [block_offsets[j], block_offsets[j + 1]) of the buffer
  // (size() + 1 ascending offsets, the same on every rank), already in
  // place on rank j; the others' blocks are copied in through the slots, a
  // chunk at a time. Fails naming the rank that did not arrive, or exited.
  [[nodiscard]] Status allgather_in_place(void* buffer, const std::size_t* block_offsets);

  // Reduces input over the group into this rank's block of output only:
  // rank j's block is bytes [block_offsets[j], block_offsets[j + 1]) (size()
  // + 1 ascending offsets on whole elements, the same on every rank); the
  // rest of output is left alone. Each element in the reduction order, so
  // with the bits allreduce gives. input == output is in place, else they
  // must not overlap. Chunk by chunk, every rank copies into its slot its
  // input's pieces of the other blocks, and once all have arrived folds the
  // others' pieces of its own block with its own input into its output:
  // one barrier per chunk and no copy out, against allreduce's two and its
  // copy of the whole result. Fails naming the rank that did not arrive, or
  // exited.
  [[nodiscard]] Status reduce_scatter(const void* input, void* output, std::size_t element_size,
                                      const ops::ReduceFn& reduce,
                                      const std::size_t* block_offsets);

 private:
  // Waits until every rank's counter (arrived or reduced) reaches sequence.
  // The single-copy path of allreduce (count > 0), after every rank has
  // published its buffers.
  [[nodiscard]] Status allreduce_single_copy(const uint8_t* in, uint8_t* out, int64_t count,
                                             std::size_t element_size, const ops::ReduceFn& reduce,
                                             const FinishFn& finish);
  // The direct path of allreduce (count > 0), after every rank has mapped
  // every other rank's buffers into peer_inputs_ and peer_outputs_.
  [[nodiscard]] Status allreduce_direct(const uint8_t* in, uint8_t* out, int64_t count,
                                        std::size_t element_size, const ops::ReduceFn& reduce,
                                        const FinishFn& finish, bool streaming);
  // Points peer_inputs_ and peer_outputs_ at every other rank's published
  // buffers of `bytes`, mapping those not mapped yet; false where some
  // buffer cannot be mapped.
  bool map_peer_buffers(std::size_t bytes);
  // Rank j's buffer `id` behind its fd `fd`, mapped (nullptr where it
  // cannot be); its mapped length in *mapped_bytes.
  const uint8_t* peer_buffer(int j, uint64_t id, uint64_t fd, std::size_t* mapped_bytes);

  // Reads `bytes` at `remote` in rank j's process into `local`; the failure
  // names this rank, rank j, what was read and the chunk.
  [[nodiscard]] Status read_peer(int j, void* local, uint64_t remote, std::size_t bytes,
                                 const char* what, std::size_t offset, std::size_t total_bytes,
                                 int64_t chunk, int64_t chunks);
  [[nodiscard]] Status wait_for_all(ShmCounter ShmRankControl::*counter, uint64_t sequence,
                                    const char* phase, int64_t chunk, int64_t chunks);
  // "; it is rank 1 (host h, pid p)" when hooks_ can name the rank.
  std::string named(int rank) const;
  // Tells hooks_.failed and returns the failure.
  Status fail_wait(const std::string& message) const;

  int rank_;
  std::size_t slot_bytes_;
  std::size_t short_chunk_bytes_ = kShmShortChunkBytes;
  std::chrono::milliseconds stall_timeout_;
  ShmWaitHooks hooks_;
  std::optional<ShmLineMode> fixed_mode_;  // else rank 0's chooser_ decides
  ShmModeChooser chooser_;
  std::vector<ShmRankControl*> controls_;
  std::vector<uint8_t*> slots_[2];  // slots_[k][j]: rank j's slot k
  uint64_t sequence_ = 0;           // chunks run by this group so far
  std::size_t single_copy_min_bytes_ = 0;
  std::size_t single_copy_end_bytes_ = 0;
  CrossMemoryRead read_;
  std::vector<uint8_t> scratch_;  // single copy: a block per rank
  std::size_t direct_min_bytes_ = SIZE_MAX;
  // Another rank's shared buffer, mapped read-only in this process.
  struct PeerMapping {
    PeerMapping(uint64_t fd, uint64_t id, const uint8_t* data, std::size_t bytes)
        : fd(fd), id(id), data(data), bytes(bytes) {}
    PeerMapping(PeerMapping&& other) noexcept;
    PeerMapping& operator=(PeerMapping&& other) noexcept;
    PeerMapping(const PeerMapping&) = delete;
    PeerMapping& operator=(const PeerMapping&) = delete;
    ~PeerMapping();
    uint64_t fd;
    uint64_t id;
    const uint8_t* data;
    std::size_t bytes;
  };
  std::vector<std::vector<PeerMapping>> peer_mappings_;  // [rank]
  // Direct path: every rank's input and output of the current call, as
  // mapped in this process (this rank's own where they lie).
  std::vector<const uint8_t*> peer_inputs_;
  std::vector<const uint8_t*> peer_outputs_;
};

}  // namespace herd::collectives
