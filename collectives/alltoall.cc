// Pairwise alltoallv; see alltoall.h.
//
// Runs on the caller's thread. Byte counts and offsets are 64-bit; only the
// transport splits a message at its own limits.
#include "collectives/alltoall.h"

#include <fmt/format.h>

#include "collectives/tags.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"

namespace herd::collectives {

using detail::finish;
using detail::Where;
using detail::wrap;

// Send block d of input starts at the sum of send_bytes[0..d), receive block
// s of output at the sum of recv_bytes[0..s) (consecutive_ranges). Step s
// posts the receive from (r - s) mod p before the send to (r + s) mod p and
// finishes both before the next step, so at most one message per peer is in
// flight.
Status pairwise_alltoallv(const void* input, const std::vector<int64_t>& send_bytes, void* output,
                          const std::vector<int64_t>& recv_bytes, Transport& transport) {
  const int p = transport.size();
  const int rank = transport.rank();
  HERD_ENFORCE_EQ(send_bytes.size(), static_cast<std::size_t>(p));
  HERD_ENFORCE_EQ(recv_bytes.size(), static_cast<std::size_t>(p));
  const std::vector<Range> send_blocks = detail::consecutive_ranges(send_bytes);
  const std::vector<Range> recv_blocks = detail::consecutive_ranges(recv_bytes);
  constexpr std::size_t kByte = 1;
  constexpr const char* kAlgorithm = "pairwise alltoallv";

  const Range own_send = send_blocks[static_cast<std::size_t>(rank)];
  const Range own_recv = recv_blocks[static_cast<std::size_t>(rank)];
  if (own_send.count != own_recv.count) {
    return Status::error(
        fmt::format("{} (rank {}): sends {} bytes to itself but expects to receive {} from itself",
                    kAlgorithm, rank, own_send.count, own_recv.count));
  }
  detail::copy_block(detail::element_at(output, own_recv.offset, kByte),
                     detail::element_at(input, own_send.offset, kByte),
                     detail::byte_size(own_send.count, kByte));

  for (int step = 1; step < p; ++step) {
    const int destination = wrap(rank + step, p);
    const int source = wrap(rank - step, p);
    const Range send_block = send_blocks[static_cast<std::size_t>(destination)];
    const Range recv_block = recv_blocks[static_cast<std::size_t>(source)];
    auto receive = transport.irecv(detail::element_at(output, recv_block.offset, kByte),
                                   detail::byte_size(recv_block.count, kByte), source,
                                   detail::kPairwiseAlltoallvTag);
    auto send = transport.isend(detail::element_at(input, send_block.offset, kByte),
                                detail::byte_size(send_block.count, kByte), destination,
                                detail::kPairwiseAlltoallvTag);
    const Where where{kAlgorithm, "exchange", step, rank};
    const Status sent = finish(*send, where, "send to", destination);
    const Status received = finish(*receive, where, "recv from", source);
    HERD_RETURN_IF_ERROR(sent);
    HERD_RETURN_IF_ERROR(received);
  }
  return Status::ok();
}

}  // namespace herd::collectives
