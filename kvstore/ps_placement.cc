#include "kvstore/ps_placement.h"

#include <cmath>

namespace herd {
namespace kv {
namespace detail {

std::vector<Slice> place_key(int64_t id, int64_t num_elements, int num_servers,
                             int64_t bigarray_bound) {
  const int64_t s = num_servers;
  if (num_elements < bigarray_bound) {
    // (id * 9973) mod S without overflow, and non-negative for negative ids
    // (upstream's keys are ints that never are).
    const int64_t server = ((id % s) * (9973 % s) % s + s) % s;
    return {Slice{static_cast<int>(server), 0, num_elements}};
  }
  std::vector<Slice> slices;
  const double per_server = static_cast<double>(num_elements) / static_cast<double>(s);
  int64_t offset = 0;
  for (int i = 0; i < num_servers; ++i) {
    const auto end = static_cast<int64_t>(std::round(per_server * (i + 1)));
    const auto begin = static_cast<int64_t>(std::round(per_server * i));
    slices.push_back(Slice{i, offset, end - begin});
    offset += end - begin;
  }
  return slices;
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
