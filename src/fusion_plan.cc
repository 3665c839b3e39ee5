// Fusion planning (see fusion_plan.h). Called on the background thread of
// every rank with the same responses, so it must depend on nothing but them.
//
// A kind is what members of one group must share: collective, dtype, op,
// prescale, postscale and device. Each kind has at most one open group. A
// response walks in order: it joins its kind's open group when its bytes
// still fit under the threshold; otherwise it opens a new group of its kind,
// which closes the old one for good. A response that alone exceeds the
// threshold, or the largest tensor fused, gets a closed group of its own and leaves its kind's open
// group open, since later small responses may still fill it. Groups are created in the order of
// their first member, so the result needs no sorting.
#include "src/fusion_plan.h"

#include <algorithm>

namespace herd::detail {
namespace {

bool same_kind(const Response& a, const Response& b) {
  return a.collective == b.collective && a.dtype == b.dtype && a.op == b.op &&
         a.prescale == b.prescale && a.postscale == b.postscale && a.device == b.device;
}

struct OpenGroup {
  std::size_t first_member;  // stands for the group's kind
  std::size_t group;         // index into the result
};

}  // namespace

std::vector<FusionGroup> plan_fusion(const std::vector<Response>& responses,
                                     int64_t threshold_bytes, int64_t max_tensor_bytes) {
  std::vector<FusionGroup> groups;
  // Few kinds are live at once (usually one), so a linear scan beats a map.
  std::vector<OpenGroup> open;
  const std::size_t threshold = threshold_bytes > 0 ? static_cast<std::size_t>(threshold_bytes) : 0;
  // The largest tensor that joins a group: one above max_tensor_bytes
  // reduces faster alone, since packing it costs two copies of its bytes,
  // more than the fixed cost of a collective of its own.
  const std::size_t largest_fused =
      max_tensor_bytes > 0 ? std::min(threshold, static_cast<std::size_t>(max_tensor_bytes))
                           : threshold;

  for (std::size_t i = 0; i < responses.size(); ++i) {
    const Response& response = responses[i];
    if (response.type == ResponseType::kError) continue;
    const std::size_t bytes = response.num_bytes();

    // Only plain allreduces fuse; every other collective runs on its own.
    if (bytes > largest_fused || threshold == 0 ||
        response.collective != CollectiveType::kAllreduce) {
      groups.push_back({{i}, bytes});
      continue;
    }

    OpenGroup* same = nullptr;
    for (OpenGroup& candidate : open) {
      if (same_kind(responses[candidate.first_member], response)) same = &candidate;
    }
    if (same != nullptr && groups[same->group].total_bytes + bytes <= threshold) {
      groups[same->group].members.push_back(i);
      groups[same->group].total_bytes += bytes;
      continue;
    }

    groups.push_back({{i}, bytes});
    if (same != nullptr) {
      *same = {i, groups.size() - 1};
    } else {
      open.push_back({i, groups.size() - 1});
    }
  }
  return groups;
}

}  // namespace herd::detail
