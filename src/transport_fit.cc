// The transport settings of a process set; see transport_fit.h.
#include "src/transport_fit.h"

#include "collectives/allreduce.h"

namespace herd::detail {
namespace {

// The settings' "auto", as read_config stores it.
constexpr int64_t kAuto = -1;

}  // namespace

Config fit_to_transport(const Config& config, const collectives::HostLayout& layout) {
  Config fitted = config;
  const bool across_hosts = layout.spans_hosts();
  if (fitted.ring_segment_bytes == kAuto) {
    fitted.ring_segment_bytes = across_hosts
                                    ? kAcrossHostsRingSegmentBytes
                                    : static_cast<int64_t>(collectives::kDefaultSegmentBytes);
  }
  if (across_hosts && fitted.eager_piece_bytes == kAuto) {
    fitted.eager_piece_bytes = kAcrossHostsEagerPieceBytes;
  }
  return fitted;
}

std::size_t ring_segment_bytes(const Config& config) {
  return config.ring_segment_bytes == kAuto ? collectives::kDefaultSegmentBytes
                                            : static_cast<std::size_t>(config.ring_segment_bytes);
}

}  // namespace herd::detail
