// The transport settings a process set runs with, fitted to how its ranks
// reach each other: the ring's segment size and the eager pieces that suit
// Open MPI's shared-memory transport on one machine lose over TCP between
// hosts, where every message costs tens of microseconds
// (docs/design/transport-fit.md has the measurements, and why the
// recursive-doubling threshold stays as it is).
//
// Called by ProcessSetState's constructor, on every member of the set, with
// the layout of the set's data communicator (collectives/mpi/host_layout.h):
// the layout is the same on every member, so every member gets the same
// settings. Pure: tested without MPI.
#pragma once

#include <cstddef>
#include <cstdint>

#include "collectives/mpi/host_layout.h"
#include "src/config.h"

namespace herd::detail {

// HERD_RING_SEGMENT_BYTES=auto on one machine: collectives::kDefaultSegmentBytes.
// Across hosts: few enough messages per chunk that their fixed cost stays
// small beside the bytes, while a chunk of a fused buffer still has two
// segments to pipeline.
constexpr int64_t kAcrossHostsRingSegmentBytes = int64_t{4} << 20;
// HERD_EAGER_PIECE_BYTES=auto across hosts: no pieces. Open MPI's TCP
// transport sends up to 64 KiB eagerly on its own, and two pieces of a
// longer message cost more there than its rendezvous.
constexpr int64_t kAcrossHostsEagerPieceBytes = 0;

// `config` with every transport setting still at auto (-1) replaced by its
// value for `layout`: across hosts (layout.spans_hosts()) the values above;
// on one machine the ring segment becomes collectives::kDefaultSegmentBytes
// and the eager piece stays auto, for collectives::agree_eager_piece_bytes
// to read from Open MPI. A value the user set always stays. Never leaves
// ring_segment_bytes at auto.
Config fit_to_transport(const Config& config, const collectives::HostLayout& layout);

// config.ring_segment_bytes as a size: collectives::kDefaultSegmentBytes
// where it is still auto (a Config that fit_to_transport has not seen, as
// in-process tests give their loops).
std::size_t ring_segment_bytes(const Config& config);

}  // namespace herd::detail
