#include "kvstore/compressed_allreduce.h"

#include <string>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

#include "herd/herd.h"

namespace herd {
namespace kv {
namespace detail {

namespace {

// One item's codes on their way: this worker's, sent as one row of
// [1, bytes] so that the allgather refuses workers whose sizes differ (only
// the first dimension may vary), and every worker's, [num_workers, bytes].
struct Gather {
  Tensor mine;
  Tensor all;
  Handle handle;
  bool started = false;
};

// Waits for every started gather from `begin` on, so that no output is freed
// while herd still writes it. Called on the way out of a failure, which is
// the one reported: these gathers' own failures are dropped.
void wait_started(std::vector<Gather>& gathers, size_t begin) {
  for (size_t i = begin; i < gathers.size(); ++i) {
    if (!gathers[i].started) continue;
    try {
      herd::wait(gathers[i].handle);
    } catch (const Error&) {
    }
    gathers[i].started = false;
  }
}

void sum_codes(const CompressionParams& params, const CompressedItem& item, const Tensor& all,
               int64_t bytes) {
  const auto& shape = all.shape();
  if (shape.size() != 2 || shape[1] != bytes || shape[0] < 1) {
    throw Error(fmt::format(
        "compressed allreduce of \"{}\": expected [num_workers, {}] bytes of codes, got {}",
        item.name, bytes, shape_to_string(shape)));
  }
  // Rank order: the first worker's values, then the others' added.
  std::vector<const uint8_t*> codes(static_cast<size_t>(shape[0]));
  for (int64_t worker = 0; worker < shape[0]; ++worker) {
    codes[static_cast<size_t>(worker)] = all.data_as<uint8_t>() + worker * bytes;
  }
  dequantize_sum(params, codes.data(), static_cast<int>(shape[0]), item.n, item.sum);
}

}  // namespace

void compressed_allreduce(const CompressionParams& params,
                          const std::vector<CompressedItem>& items) {
  if (params.type == CompressionType::kNone) {
    throw Error("compressed allreduce needs type \"2bit\" or \"1bit\", got \"none\"");
  }
  // Checked before anything is submitted, so that every worker refuses alike:
  // a name submitted twice would otherwise be refused only where the first
  // gather is still in flight.
  std::unordered_set<std::string> names;
  for (const CompressedItem& item : items) {
    if (!names.insert(item.name).second) {
      throw Error(
          fmt::format("compressed allreduce: item \"{}\" appears twice in one call", item.name));
    }
  }
  std::vector<Gather> gathers(items.size());
  try {
    for (size_t i = 0; i < items.size(); ++i) {
      const CompressedItem& item = items[i];
      const int64_t bytes = compressed_bytes(params.type, item.n);
      Gather& g = gathers[i];
      g.mine.reset(DataType::kUInt8, {1, bytes});
      quantize(params, item.grad, item.residual, item.n, g.mine.data_as<uint8_t>());
      g.handle = herd::allgather_async(item.name, g.mine.view(), &g.all);
      g.started = true;
    }
  } catch (...) {
    // Nothing in flight may outlive its buffers; the submission's failure is
    // the one to report.
    wait_started(gathers, 0);
    throw;
  }
  // Each item is summed as soon as its codes are in, while later ones travel.
  for (size_t i = 0; i < items.size(); ++i) {
    try {
      herd::wait(gathers[i].handle);
      gathers[i].started = false;
      sum_codes(params, items[i], gathers[i].all, compressed_bytes(params.type, items[i].n));
    } catch (...) {
      gathers[i].started = false;
      wait_started(gathers, i + 1);
      throw;
    }
  }
}

}  // namespace detail
}  // namespace kv
}  // namespace herd
