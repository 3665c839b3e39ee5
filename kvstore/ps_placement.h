// Where a dist_async key lives on the parameter servers: exactly upstream's
// placement (MXNet's EncodeDefaultKey), so that a job spreads its keys as
// the same job on MXNet would. See docs/kvstore.md, "Parameter servers".
#pragma once

#include <cstdint>
#include <vector>

namespace herd {
namespace kv {
namespace detail {

// One server's part of a key: elements [offset, offset + count) of the value.
struct Slice {
  int server = 0;
  int64_t offset = 0;
  int64_t count = 0;

  bool operator==(const Slice& other) const {
    return server == other.server && offset == other.offset && count == other.count;
  }
};

// The slices of key `id` (the int key, or the string key's init-order
// index) holding `num_elements` elements over `num_servers` servers:
// - fewer than `bigarray_bound` elements: one slice, the whole value, on
//   server (id * 9973) mod num_servers (taken non-negative);
// - otherwise one slice per server, in server order: slice i has
//   round(n / S * (i + 1)) - round(n / S * i) elements, computed in double
//   and rounded half away from zero, as upstream.
std::vector<Slice> place_key(int64_t id, int64_t num_elements, int num_servers,
                             int64_t bigarray_bound);

}  // namespace detail
}  // namespace kv
}  // namespace herd
