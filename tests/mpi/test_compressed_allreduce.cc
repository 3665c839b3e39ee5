// Multi-rank test of kv::detail::compressed_allreduce (kvstore/
// compressed_allreduce.h) through herd's runtime.
//
// Every rank's gradient is a known function of (rank, item, step, index), so
// each rank replays every rank's quantization with the scalar reference of
// tests/unit/kvstore/compression_reference.h, and sums the dequantized codes
// in rank order in float32: the result must equal that sum bitwise, on every
// rank, and this rank's residual the reference's. Cases: 2bit and 1bit, item
// sizes 0, 1, 15, 16, 17, 33, 1000 and 65537 in one call, three steps (the
// residual carries over; the same names again). Failures: a worker whose
// item has another size fails every worker naming the item; type none and a
// name twice in one call are refused on every rank, and the runtime keeps
// working after.
// Run by ctest under mpiexec at 2, 3 and 4 ranks.
#include <mpi.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "kvstore/compressed_allreduce.h"
#include "mpi_test_util.h"
#include "tests/unit/kvstore/compression_reference.h"

namespace {

using herd::kv::CompressionParams;
using herd::kv::CompressionType;
using herd::kv::detail::compressed_allreduce;
using herd::kv::detail::CompressedItem;
using namespace herd_test;

struct Ctx {
  Recorder& rec;
  int rank;
  int size;
};

// Rank r's gradient of item `item` at `step`: multiples of an eighth of the
// threshold (so sums meet the threshold exactly) mixed with arbitrary floats.
float gradient(int rank, int item, int step, int64_t index, float scale) {
  const uint64_t h =
      mix64((static_cast<uint64_t>(rank) << 48) ^ (static_cast<uint64_t>(item) << 40) ^
            (static_cast<uint64_t>(step) << 32) ^ static_cast<uint64_t>(index));
  if (h & 1) return scale * static_cast<float>(static_cast<int>((h >> 8) % 17) - 8) / 8.0f;
  return scale * (static_cast<float>((h >> 16) % 2000001) / 1e6f - 1.0f);
}

std::vector<float> gradient_of(int rank, int item, int step, int64_t n, float scale) {
  std::vector<float> g(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) g[static_cast<size_t>(i)] = gradient(rank, item, step, i, scale);
  return g;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

void compare(CaseCheck& check, const std::vector<float>& actual,
             const std::vector<float>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!same_bits(actual[i], expected[i])) {
      check.mismatch(static_cast<int64_t>(i), double_string(expected[i]), double_string(actual[i]));
    }
  }
}

void sum_cases(const Ctx& ctx, const CompressionParams& params, const std::string& label) {
  const std::vector<int64_t> sizes = {0, 1, 15, 16, 17, 33, 1000, 65537};
  const float scale = params.type == CompressionType::k2Bit ? params.threshold : 1.0f;
  const size_t items = sizes.size();
  // Every rank's residuals, replayed here; this rank's own, as herd keeps them.
  std::vector<std::vector<std::vector<float>>> ref_residual(static_cast<size_t>(ctx.size),
                                                            std::vector<std::vector<float>>(items));
  std::vector<std::vector<float>> residual(items);
  for (size_t k = 0; k < items; ++k) {
    residual[k].assign(static_cast<size_t>(sizes[k]), 0.0f);
    for (auto& r : ref_residual) r[k].assign(static_cast<size_t>(sizes[k]), 0.0f);
  }
  for (int step = 0; step < 3; ++step) {
    std::vector<std::vector<float>> grads(items), sums(items);
    std::vector<CompressedItem> call;
    for (size_t k = 0; k < items; ++k) {
      grads[k] = gradient_of(ctx.rank, static_cast<int>(k), step, sizes[k], scale);
      sums[k].assign(static_cast<size_t>(sizes[k]), -7.0f);
      call.push_back({label + ".item" + std::to_string(k), grads[k].data(), residual[k].data(),
                      sizes[k], sums[k].data()});
    }
    const std::string case_name = label + " step " + std::to_string(step);
    try {
      compressed_allreduce(params, call);
    } catch (const herd::Error& e) {
      ctx.rec.fail(case_name, std::string("threw: ") + e.what());
      return;
    }
    for (size_t k = 0; k < items; ++k) {
      std::vector<float> expected;
      for (int r = 0; r < ctx.size; ++r) {
        const auto ref = herd::kv::test::reference_quantize(
            params, gradient_of(r, static_cast<int>(k), step, sizes[k], scale),
            ref_residual[static_cast<size_t>(r)][k]);
        if (r == 0) {
          expected = ref.dequantized;
        } else {
          for (size_t i = 0; i < expected.size(); ++i) expected[i] += ref.dequantized[i];
        }
      }
      CaseCheck sum_check(ctx.rec, case_name + " item " + std::to_string(k) + " sum");
      compare(sum_check, sums[k], expected);
      CaseCheck residual_check(ctx.rec, case_name + " item " + std::to_string(k) + " residual");
      compare(residual_check, residual[k], ref_residual[static_cast<size_t>(ctx.rank)][k]);
    }
  }
}

void failure_cases(const Ctx& ctx) {
  const CompressionParams two{CompressionType::k2Bit, 0.5f};
  std::vector<float> g(40, 1.0f), r(40, 0.0f), sum(40, 0.0f);

  // The last rank's item is 33 values (12 bytes of codes), the others' 17
  // (8 bytes): every rank fails naming the item.
  {
    const int64_t n = ctx.rank == ctx.size - 1 ? 33 : 17;
    const std::string what = error_of([&] {
      compressed_allreduce(two, {{"mismatch.item", g.data(), r.data(), n, sum.data()}});
    });
    ctx.rec.check(what.find("mismatch.item") != std::string::npos, "size mismatch",
                  "expected an error naming mismatch.item, got: " + what);
  }
  // Type none: refused at once, on every rank alike.
  {
    const std::string what = error_of([&] {
      compressed_allreduce({}, {{"none.item", g.data(), r.data(), 40, sum.data()}});
    });
    ctx.rec.check(what.find("none") != std::string::npos && what != "(no error)", "type none",
                  "expected a refusal naming none, got: " + what);
  }
  // The same name twice in one call: refused before anything is submitted.
  {
    std::vector<float> r2(40, 0.0f), sum2(40, 0.0f);
    const std::string what = error_of([&] {
      compressed_allreduce(two, {{"twice.item", g.data(), r.data(), 40, sum.data()},
                                 {"twice.item", g.data(), r2.data(), 40, sum2.data()}});
    });
    ctx.rec.check(what.find("twice.item") != std::string::npos, "name twice",
                  "expected an error naming twice.item, got: " + what);
  }
  // The runtime still works: a fresh call gives size * 0.5 everywhere (every
  // rank pushes 1.0 with a zero residual: code 11).
  {
    std::vector<float> fresh(40, 0.0f);
    std::vector<float> grad(40, 1.0f);
    std::vector<float> out(40, 0.0f);
    const std::string what = error_of([&] {
      compressed_allreduce(two, {{"after.item", grad.data(), fresh.data(), 40, out.data()}});
    });
    ctx.rec.check(what == "(no error)", "after failures", "threw: " + what);
    CaseCheck check(ctx.rec, "after failures sum");
    compare(check, out, std::vector<float>(40, 0.5f * static_cast<float>(ctx.size)));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_compressed_allreduce", world.rank);
  try {
    herd::init();
    const Ctx ctx{rec, herd::rank(), herd::size()};
    sum_cases(ctx, {CompressionType::k2Bit, 0.5f}, "2bit");
    sum_cases(ctx, {CompressionType::k2Bit, 0.0625f}, "2bit-small");
    sum_cases(ctx, {CompressionType::k1Bit, 0.0f}, "1bit");
    failure_cases(ctx);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("run", std::string("exception: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
