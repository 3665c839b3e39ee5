// The shard collectives of ShmAllreduceGroup that the hierarchical
// allreduce (collectives/hierarchical_allreduce.h) runs inside a host:
// reduce_scatter (step 1) and allgather_in_place (step 3). Both work on
// blocks of a buffer, rank j's block being bytes [block_offsets[j],
// block_offsets[j + 1]), and move them one chunk at a time through the same
// two slots and sequence numbers as the allreduce, with one barrier (the
// `arrived` of chunk k) per chunk:
//   reduce_scatter: every rank copies its input's piece k of each other
//     rank's block into its slot k mod 2 (at that rank's place in the
//     slot); once every rank has arrived, each folds the others' pieces of
//     its own block with its own input into its output;
//   allgather_in_place: every rank copies piece k of its own block into its
//     slot; once every rank has arrived, each copies the others' pieces out.
// One barrier is enough: a rank reads the others' slots of chunk k only
// before it arrives at chunk k + 1, and writes its slot k mod 2 again only
// for chunk k + 2, after every rank arrived at k + 1. An allreduce that
// follows writes its first slot, of the other parity, only after its own
// first barrier, which every rank reaches after its last read here. Ranks
// whose block is shorter (or empty) move nothing in their last chunks but
// still arrive: the number of chunks follows the longest block, the same on
// every rank.
#include <algorithm>
#include <cstring>
#include <vector>

#include "collectives/reduction_order.h"
#include "collectives/shm/shm_allreduce.h"
#include "common/enforce.h"
#include "ops/stream_copy.h"

namespace herd::collectives {

Status ShmAllreduceGroup::allgather_in_place(void* buffer, const std::size_t* block_offsets) {
  const auto ranks = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank_);
  std::size_t longest = 0;
  for (std::size_t j = 0; j < ranks; ++j) {
    HERD_ENFORCE_LE(block_offsets[j], block_offsets[j + 1]);
    longest = std::max(longest, block_offsets[j + 1] - block_offsets[j]);
  }
  const std::size_t total_bytes = block_offsets[ranks] - block_offsets[0];
  if (ranks == 1 || longest == 0) return Status::ok();
  // As the allreduce of the same bytes: whole slots when the output streams
  // past the cache, short chunks that stay in it otherwise.
  const bool streaming = shm_streams_output(total_bytes, 0);
  const std::size_t chunk_bytes = shm_chunk_bytes(streaming, slot_bytes_, short_chunk_bytes_);
  const auto chunks = static_cast<int64_t>((longest + chunk_bytes - 1) / chunk_bytes);
  auto* out = static_cast<uint8_t*>(buffer);
  ShmRankControl& mine = *controls_[me];
  // Bytes [from, from + length) of rank j's block in chunk `chunk`.
  const auto piece = [&](std::size_t j, int64_t chunk, std::size_t* from) {
    const std::size_t block = block_offsets[j + 1] - block_offsets[j];
    const std::size_t at = static_cast<std::size_t>(chunk) * chunk_bytes;
    *from = block_offsets[j] + std::min(at, block);
    return std::min(chunk_bytes, block - std::min(at, block));
  };

  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const uint64_t sequence = ++sequence_;
    const std::vector<uint8_t*>& slot = slots_[sequence % 2];
    std::size_t from = 0;
    std::size_t length = piece(me, chunk, &from);
    if (length > 0) std::memcpy(slot[me], out + from, length);
    mine.arrived.value.store(sequence, std::memory_order_release);
    HERD_RETURN_IF_ERROR(
        wait_for_all(&ShmRankControl::arrived, sequence, "the allgather's copy-in", chunk, chunks));
    for (std::size_t j = 0; j < ranks; ++j) {
      if (j == me) continue;
      length = piece(j, chunk, &from);
      if (length == 0) continue;
      if (streaming) {
        ops::stream_copy(out + from, slot[j], length);
      } else {
        std::memcpy(out + from, slot[j], length);
      }
    }
  }
  // The caller may hand the buffer to another thread once this returns.
  if (streaming) ops::stream_fence();
  return Status::ok();
}

Status ShmAllreduceGroup::reduce_scatter(const void* input, void* output, std::size_t element_size,
                                         const ops::ReduceFn& reduce,
                                         const std::size_t* block_offsets) {
  constexpr std::size_t kLineBytes = 64;
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  HERD_ENFORCE_EQ(kLineBytes % element_size, std::size_t{0});
  const auto ranks = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank_);
  std::size_t longest = 0;
  for (std::size_t j = 0; j < ranks; ++j) {
    HERD_ENFORCE_LE(block_offsets[j], block_offsets[j + 1]);
    HERD_ENFORCE_EQ(block_offsets[j] % element_size, std::size_t{0});
    longest = std::max(longest, block_offsets[j + 1] - block_offsets[j]);
  }
  HERD_ENFORCE_EQ(block_offsets[ranks] % element_size, std::size_t{0});
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const std::size_t own_bytes = block_offsets[me + 1] - block_offsets[me];
  if (ranks == 1 || longest == 0) {
    if (in != out && own_bytes > 0) {
      std::memcpy(out + block_offsets[me], in + block_offsets[me], own_bytes);
    }
    return Status::ok();
  }
  // A chunk spans as many bytes of the buffer as the allreduce's: piece k
  // of each of the `ranks` blocks, each piece at its block's place in the
  // slot, in whole cache lines where a piece holds one.
  const std::size_t total_bytes = block_offsets[ranks] - block_offsets[0];
  const std::size_t chunk_bytes =
      shm_chunk_bytes(shm_streams_output(total_bytes, 0), slot_bytes_, short_chunk_bytes_);
  std::size_t piece_bytes = chunk_bytes / ranks;
  piece_bytes -= piece_bytes % (piece_bytes >= kLineBytes ? kLineBytes : element_size);
  HERD_ENFORCE_GE(piece_bytes, element_size);
  const auto chunks = static_cast<int64_t>((longest + piece_bytes - 1) / piece_bytes);
  ShmRankControl& mine = *controls_[me];
  // Bytes [*from, *from + length) of rank j's block in chunk `chunk`.
  const auto piece = [&](std::size_t j, int64_t chunk, std::size_t* from) {
    const std::size_t block = block_offsets[j + 1] - block_offsets[j];
    const std::size_t at = std::min(static_cast<std::size_t>(chunk) * piece_bytes, block);
    *from = block_offsets[j] + at;
    return std::min(piece_bytes, block - at);
  };
  std::vector<const void*> sources(ranks);

  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const uint64_t sequence = ++sequence_;
    const std::vector<uint8_t*>& slot = slots_[sequence % 2];
    std::size_t from = 0;
    for (std::size_t j = 0; j < ranks; ++j) {
      if (j == me) continue;
      const std::size_t length = piece(j, chunk, &from);
      if (length > 0) std::memcpy(slot[me] + j * piece_bytes, in + from, length);
    }
    mine.arrived.value.store(sequence, std::memory_order_release);
    HERD_RETURN_IF_ERROR(wait_for_all(&ShmRankControl::arrived, sequence,
                                      "the reduce-scatter's copy-in", chunk, chunks));
    const std::size_t length = piece(me, chunk, &from);
    if (length == 0) continue;
    for (std::size_t j = 0; j < ranks; ++j) {
      sources[j] = j == me ? in + from : slot[j] + me * piece_bytes;
    }
    // In place, out + from is this rank's own input piece: the fold reads
    // each element before it writes it.
    detail::fold_in_reduction_order(out + from, sources.data(), static_cast<int>(ranks),
                                    static_cast<int64_t>(length / element_size), element_size,
                                    reduce);
  }
  return Status::ok();
}

}  // namespace herd::collectives
