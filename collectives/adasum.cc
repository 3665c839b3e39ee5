// Adasum allreduce by vector halving and distance doubling; see adasum.h.
//
// Runs on the caller's thread, one collective at a time per Transport. The
// buffer is addressed by element offsets (Span); a rank's segment after each
// level depends only on the rank's bits below that level, so the two ranks
// of a pair always hold the same segment when they meet.
#include "collectives/adasum.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "collectives/tags.h"
#include "collectives/thread_scratch.h"
#include "collectives/transfer_util.h"
#include "common/enforce.h"
#include "ops/adasum.h"

namespace herd::collectives {

using detail::byte_size;
using detail::element_at;
using detail::Where;

namespace {

constexpr const char* kAlgorithm = "adasum allreduce";

// Below this squared norm a vector's coefficient stays 1: dividing by it
// could overflow, and such a vector adds (next to) nothing anyway.
const double kSmallestNorm2 = std::sqrt(std::numeric_limits<double>::min());

struct ReceivedHalfTag {};

// Elements [offset, offset + count) of the buffer.
struct Span {
  int64_t offset = 0;
  int64_t count = 0;
  int64_t end() const { return offset + count; }
};

Span intersect(const Span& a, const Span& b) {
  const int64_t begin = std::max(a.offset, b.offset);
  const int64_t end = std::min(a.end(), b.end());
  return end > begin ? Span{begin, end - begin} : Span{begin, 0};
}

// Sends `send_bytes` from `send` to `peer` while receiving `recv_bytes` from
// it into `recv`; both are waited for, and the first failure returned.
Status exchange(const void* send, std::size_t send_bytes, void* recv, std::size_t recv_bytes,
                int peer, int tag, Transport& transport, const Where& where) {
  auto received = transport.irecv(recv, recv_bytes, peer, tag);
  auto sent = transport.isend(send, send_bytes, peer, tag);
  Status send_status = detail::finish(*sent, where, "send to", peer);
  Status recv_status = detail::finish(*received, where, "recv from", peer);
  HERD_RETURN_IF_ERROR(send_status);
  return recv_status;
}

// Adds up `values` over the aligned block of `block` ranks (a power of two)
// that holds this rank, by recursive doubling. Both ranks of a pair add the
// same two numbers (addition commutes exactly), so the whole block ends with
// the same bits.
Status sum_over_block(std::vector<double>& values, std::vector<double>& received, int block,
                      int level, Transport& transport) {
  const int rank = transport.rank();
  const std::size_t bytes = values.size() * sizeof(double);
  const Where where{kAlgorithm, "norms", level, rank};
  for (int mask = 1; mask < block; mask <<= 1) {
    HERD_RETURN_IF_ERROR(exchange(values.data(), bytes, received.data(), bytes, rank ^ mask,
                                  detail::kAdasumNormsTag, transport, where));
    for (std::size_t i = 0; i < values.size(); ++i) values[i] += received[i];
  }
  return Status::ok();
}

double coefficient(double dot, double norm2) {
  return norm2 >= kSmallestNorm2 ? 1.0 - dot / (2.0 * norm2) : 1.0;
}

}  // namespace

bool adasum_supports_ranks(int ranks) { return ranks >= 1 && (ranks & (ranks - 1)) == 0; }

Status adasum_allreduce(void* buf, const std::vector<int64_t>& counts, DataType dtype,
                        Transport& transport) {
  HERD_ENFORCE(ops::adasum_supports(dtype));
  const int p = transport.size();
  if (!adasum_supports_ranks(p)) {
    return Status::not_implemented(
        fmt::format("Adasum allreduce needs a power-of-two number of ranks (1, 2, 4, 8, ...); "
                    "this set has {} ranks",
                    p));
  }
  std::vector<Span> tensors;
  int64_t total = 0;
  for (int64_t count : counts) {
    HERD_ENFORCE_GE(count, 0);
    tensors.push_back(Span{total, count});
    total += count;
  }
  if (p == 1 || total == 0) return Status::ok();

  const int rank = transport.rank();
  const std::size_t element_bytes = element_size(dtype);
  // The half this rank keeps is at most ceil(total / 2) elements, at level 1.
  unsigned char* received =
      detail::thread_scratch<ReceivedHalfTag>(byte_size(total - total / 2, element_bytes));
  std::vector<double> sums(3 * tensors.size());
  std::vector<double> received_sums(sums.size());

  Span mine{0, total};
  std::vector<Span> given_up;  // per level: the segment the partner kept
  for (int level = 1; level < p; level <<= 1) {
    const int peer = rank ^ level;
    const bool lower = (rank & level) == 0;
    const Span front{mine.offset, mine.count / 2};
    const Span back{front.end(), mine.count - front.count};
    const Span kept = lower ? front : back;
    const Span gone = lower ? back : front;
    HERD_RETURN_IF_ERROR(
        exchange(element_at(buf, gone.offset, element_bytes), byte_size(gone.count, element_bytes),
                 received, byte_size(kept.count, element_bytes), peer, detail::kAdasumExchangeTag,
                 transport, Where{kAlgorithm, "reduce", level, rank}));

    // This rank's part of each tensor's sums, ordered as (dot, |lower
    // half's vector|^2, |upper half's vector|^2) so the block adds like terms.
    std::vector<Span> parts;
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const Span part = intersect(kept, tensors[t]);
      parts.push_back(part);
      const ops::DotAndNorms local = ops::dot_and_norms(
          element_at(buf, part.offset, element_bytes),
          element_at(received, part.offset - kept.offset, element_bytes), part.count, dtype);
      sums[3 * t] = local.dot;
      sums[3 * t + 1] = lower ? local.a_norm2 : local.b_norm2;
      sums[3 * t + 2] = lower ? local.b_norm2 : local.a_norm2;
    }
    HERD_RETURN_IF_ERROR(sum_over_block(sums, received_sums, 2 * level, level, transport));
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const double dot = sums[3 * t];
      const double mine_norm2 = lower ? sums[3 * t + 1] : sums[3 * t + 2];
      const double theirs_norm2 = lower ? sums[3 * t + 2] : sums[3 * t + 1];
      const Span& part = parts[t];
      ops::scaled_add(element_at(buf, part.offset, element_bytes), coefficient(dot, mine_norm2),
                      element_at(received, part.offset - kept.offset, element_bytes),
                      coefficient(dot, theirs_norm2), part.count, dtype);
    }
    given_up.push_back(gone);
    mine = kept;
  }

  for (int level = p / 2; level >= 1; level >>= 1) {
    const int peer = rank ^ level;
    const Span theirs = given_up.back();
    given_up.pop_back();
    HERD_RETURN_IF_ERROR(exchange(
        element_at(buf, mine.offset, element_bytes), byte_size(mine.count, element_bytes),
        element_at(buf, theirs.offset, element_bytes), byte_size(theirs.count, element_bytes), peer,
        detail::kAdasumAllgatherTag, transport, Where{kAlgorithm, "allgather", level, rank}));
    mine = Span{std::min(mine.offset, theirs.offset), mine.count + theirs.count};
  }
  return Status::ok();
}

}  // namespace herd::collectives
