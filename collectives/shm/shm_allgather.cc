// ShmAllreduceGroup::allgather_in_place: the shared-memory allgather that
// ends the hierarchical allreduce (collectives/hierarchical_allreduce.h).
//
// One chunk at a time, chunk k covering bytes [k c, (k + 1) c) of every
// rank's block (c: the chunk the allreduce of this many bytes would take),
// on the same two slots and sequence numbers as the allreduce:
//   1. every rank copies its block's chunk into its slot k mod 2 and
//      publishes `arrived`;
//   2. once every rank has arrived, every rank copies the other ranks'
//      chunks out of their slots into its buffer.
// One barrier per chunk is enough: a rank writes slot k mod 2 again only for
// the chunk after next, after every rank arrived at the next one and so
// finished copying this one out; an allreduce that follows on the group
// writes its first slot only after its own first barrier, which every rank
// reaches after its last copy out here. Ranks whose block is shorter (or
// empty) copy nothing in their last chunks but still arrive: the number of
// chunks follows the longest block, the same on every rank.
#include <algorithm>
#include <cstring>

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

}  // namespace herd::collectives
