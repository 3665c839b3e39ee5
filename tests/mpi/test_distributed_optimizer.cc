// Multi-rank test of herd::DistributedOptimizer, broadcast_parameters and
// broadcast_optimizer_state (include/herd/train/distributed_optimizer.h).
//
// The model is linear least squares, loss = mean over the batch of
// (w . x + b - y)^2 / 2, with w of kDim elements and a scalar bias b (two
// parameters), its gradient written out here. Sample i of the dataset is a
// pure function of i (mix64), so every rank can compute any sample. Each
// training step uses a global batch of size * kPerRank samples; rank r takes
// its contiguous shard. After several steps every rank's parameters must
// equal, within float tolerance, those of a reference trained here in double
// on the whole global batch, with SGD (momentum) and Adam written out here
// from their formulas (not through herd's optimizers or DistributedOptimizer).
// Every case also checks that the ranks hold bitwise identical parameters.
// Last, a checkpoint of another rank count is refused.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "herd/train/checkpoint.h"
#include "herd/train/distributed_optimizer.h"
#include "herd/train/optimizer.h"
#include "mpi_test_util.h"

namespace {

using namespace herd_test;

constexpr int kDim = 10;
constexpr int kPerRank = 4;  // samples per rank per backward pass
constexpr int kSteps = 6;

// --- data -------------------------------------------------------------------

double uniform(uint64_t key) {  // in [-1, 1)
  return static_cast<double>(mix64(key) >> 11) * 0x1.0p-52 - 1.0;
}

struct Sample {
  double x[kDim];
  double y;
};

Sample sample(int64_t i, uint64_t seed) {
  Sample s{};
  double y = 0.3;
  for (int j = 0; j < kDim; ++j) {
    s.x[j] = uniform(seed * 1000003 + static_cast<uint64_t>(i) * 64 + static_cast<uint64_t>(j));
    y += (0.5 + 0.1 * j) * s.x[j];
  }
  s.y = y + 0.1 * uniform(seed * 7919 + static_cast<uint64_t>(i) * 64 + 63);
  return s;
}

// Mean gradient of the loss over samples [first, first + count) at (w, b):
// grad[0..kDim) for w, grad[kDim] for b.
std::vector<double> mean_gradient(const std::vector<double>& w, double b, int64_t first,
                                  int64_t count, uint64_t seed) {
  std::vector<double> g(kDim + 1, 0.0);
  for (int64_t i = first; i < first + count; ++i) {
    const Sample s = sample(i, seed);
    double r = b - s.y;
    for (int j = 0; j < kDim; ++j) r += w[j] * s.x[j];
    for (int j = 0; j < kDim; ++j) g[j] += r * s.x[j];
    g[kDim] += r;
  }
  for (double& v : g) v /= static_cast<double>(count);
  return g;
}

std::vector<double> initial_w(uint64_t salt) {
  std::vector<double> w(kDim);
  for (int j = 0; j < kDim; ++j) w[j] = 0.5 * uniform(salt * 31 + static_cast<uint64_t>(j));
  return w;
}

// --- the reference: one process, whole batches, double ------------------------

enum class Kind { kSgd, kAdam };

struct RefOptimizer {
  Kind kind = Kind::kSgd;
  double lr = 0, momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::vector<double> m, v;  // momentum buffer / Adam moments over all kDim + 1 values
  int64_t t = 0;

  void step(std::vector<double>& theta, const std::vector<double>& g) {
    ++t;
    if (m.empty()) m.assign(theta.size(), 0.0), v.assign(theta.size(), 0.0);
    for (std::size_t i = 0; i < theta.size(); ++i) {
      if (kind == Kind::kSgd) {
        double d = g[i];
        if (momentum != 0) {
          m[i] = t == 1 ? g[i] : momentum * m[i] + g[i];
          d = m[i];
        }
        theta[i] -= lr * d;
      } else {
        m[i] = beta1 * m[i] + (1 - beta1) * g[i];
        v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
        const double bc1 = 1 - std::pow(beta1, static_cast<double>(t));
        const double bc2 = 1 - std::pow(beta2, static_cast<double>(t));
        theta[i] -= (lr / bc1) * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + eps);
      }
    }
  }
};

// theta = [w..., b] after `steps` steps on global batches of `batch` samples;
// `grad_scale` multiplies the mean gradient (op sum: the number of ranks).
std::vector<double> reference(RefOptimizer opt, int steps, int64_t batch, uint64_t seed,
                              double grad_scale = 1.0) {
  std::vector<double> theta = initial_w(seed);
  theta.push_back(0.1);
  for (int s = 0; s < steps; ++s) {
    std::vector<double> w(theta.begin(), theta.begin() + kDim);
    std::vector<double> g = mean_gradient(w, theta[kDim], s * batch, batch, seed);
    for (double& v : g) v *= grad_scale;
    opt.step(theta, g);
  }
  return theta;
}

// --- the distributed side -----------------------------------------------------

struct Model {
  std::vector<float> w, dw;
  float b = 0.1f, db = 0;
  std::vector<herd::Parameter> params;

  explicit Model(uint64_t seed) : w(kDim), dw(kDim, 0.0f) {
    const std::vector<double> w0 = initial_w(seed);
    for (int j = 0; j < kDim; ++j) w[j] = static_cast<float>(w0[j]);
    params = {herd::Parameter("linear.weight", w.data(), dw.data(), kDim),
              herd::Parameter("linear.bias", &b, &db, 1)};
  }
  Model(const Model&) = delete;

  // Adds the mean gradient over [first, first + count) to dw and db.
  void accumulate(int64_t first, int64_t count, uint64_t seed) {
    std::vector<double> wd(w.begin(), w.end());
    const std::vector<double> g = mean_gradient(wd, b, first, count, seed);
    for (int j = 0; j < kDim; ++j) dw[j] += static_cast<float>(g[j]);
    db += static_cast<float>(g[kDim]);
  }
  void zero_grad() {
    std::fill(dw.begin(), dw.end(), 0.0f);
    db = 0;
  }
  std::vector<double> theta() const {
    std::vector<double> t(w.begin(), w.end());
    t.push_back(b);
    return t;
  }
};

struct Ctx {
  Recorder& rec;
  int rank;
  int size;
};

void compare(CaseCheck& check, const std::vector<double>& actual,
             const std::vector<double>& expected, double rel) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const double tol = rel * std::max(1.0, std::fabs(expected[i]));
    if (!(std::fabs(actual[i] - expected[i]) <= tol)) {
      check.mismatch(static_cast<int64_t>(i), double_string(expected[i]), double_string(actual[i]));
    }
  }
}

// Every rank's parameters equal rank 0's, bitwise.
void check_identical(CaseCheck& check, const std::vector<float>& values, const std::string& tag) {
  std::vector<float> root(values);
  herd::broadcast(
      "test/identical/" + tag,
      herd::TensorView{root.data(), herd::DataType::kFloat32, {static_cast<int64_t>(root.size())}},
      0);
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (root[i] != values[i]) {
      check.mismatch(static_cast<int64_t>(i), "rank 0's " + double_string(root[i]),
                     double_string(values[i]));
    }
  }
}

std::vector<float> flat(const Model& m) {
  std::vector<float> v(m.w);
  v.push_back(m.b);
  return v;
}

struct Run {
  Kind kind = Kind::kSgd;
  double lr = 0.1, momentum = 0;
  herd::DistributedOptimizerOptions options;
  // How the backward pass reports: 0 every gradient, 1 forgets the bias,
  // 2 reports nothing, 3 calls synchronize() before step().
  int report = 0;
};

// Trains kSteps steps with DistributedOptimizer; each step runs
// backward_passes_per_step passes of kPerRank samples per rank.
void train(Model& model, const Run& run, const Ctx& ctx, uint64_t seed) {
  herd::SGDOptions sgd_options;
  sgd_options.lr = run.lr;
  sgd_options.momentum = run.momentum;
  herd::AdamOptions adam_options;
  adam_options.lr = run.lr;
  herd::SGD sgd(sgd_options);
  herd::Adam adam(adam_options);
  herd::Optimizer& inner = run.kind == Kind::kSgd ? static_cast<herd::Optimizer&>(sgd) : adam;
  herd::DistributedOptimizer opt(inner, model.params, run.options);
  const int k = run.options.backward_passes_per_step;
  const int64_t step_batch = static_cast<int64_t>(ctx.size) * kPerRank * k;
  for (int s = 0; s < kSteps; ++s) {
    for (int pass = 0; pass < k; ++pass) {
      const int64_t first =
          s * step_batch + (static_cast<int64_t>(pass) * ctx.size + ctx.rank) * kPerRank;
      model.accumulate(first, kPerRank, seed);
      // The backward pass reports the bias first (the last layer's gradient
      // is complete first), then the weight.
      if (run.report == 0 || run.report == 3) opt.grad_ready(model.params[1]);
      if (run.report != 2) opt.grad_ready("linear.weight");
      if (run.report == 3 && opt.is_final_pass()) opt.synchronize();
      const bool stepped = opt.step();
      if (stepped != (pass == k - 1)) {
        throw herd::Error("step() returned " + std::to_string(stepped) + " on pass " +
                          std::to_string(pass));
      }
      if (stepped) model.zero_grad();
    }
  }
}

void equivalence(const Ctx& ctx, const std::string& name, const Run& run, double rel,
                 uint64_t seed) {
  CaseCheck check(ctx.rec, name);
  try {
    Model model(seed);
    train(model, run, ctx, seed);
    RefOptimizer ref;
    ref.kind = run.kind;
    ref.lr = run.lr;
    ref.momentum = run.momentum;
    const int64_t batch =
        static_cast<int64_t>(ctx.size) * kPerRank * run.options.backward_passes_per_step;
    const double scale = run.options.op == herd::ReduceOp::kSum ? ctx.size : 1.0;
    compare(check, model.theta(), reference(ref, kSteps, batch, seed, scale), rel);
    check_identical(check, flat(model), name);
  } catch (const std::exception& e) {
    check.fail(std::string("exception: ") + e.what());
  }
}

void equivalence_cases(const Ctx& ctx) {
  constexpr double kFloatTol = 1e-5;
  Run sgd;
  sgd.kind = Kind::kSgd;
  sgd.lr = 0.1;
  sgd.momentum = 0.9;
  equivalence(ctx, "sgd momentum = 1 process on the whole batch", sgd, kFloatTol, 11);

  Run adam;
  adam.kind = Kind::kAdam;
  adam.lr = 0.01;
  equivalence(ctx, "adam = 1 process on the whole batch", adam, kFloatTol, 12);

  Run accum = sgd;
  accum.options.backward_passes_per_step = 2;
  equivalence(ctx, "2 backward passes per step = 1 pass on the 2-fold batch (sgd)", accum,
              kFloatTol, 13);
  Run accum3 = adam;
  accum3.options.backward_passes_per_step = 3;
  equivalence(ctx, "3 backward passes per step = 1 pass on the 3-fold batch (adam)", accum3,
              kFloatTol, 14);

  Run sum = sgd;
  sum.lr = 0.02;
  sum.options.op = herd::ReduceOp::kSum;
  equivalence(ctx, "op sum = size x the mean gradient", sum, kFloatTol, 15);

  Run predivide = sgd;
  predivide.options.gradient_predivide_factor = ctx.size;
  equivalence(ctx, "gradient_predivide_factor = size", predivide, kFloatTol, 16);
  Run predivide2 = adam;
  predivide2.options.gradient_predivide_factor = 0.5;
  predivide2.options.backward_passes_per_step = 2;
  equivalence(ctx, "gradient_predivide_factor 0.5 with 2 passes (adam)", predivide2, kFloatTol, 17);

  // float16 carries ~11 significant bits: 2^-11 relative per gradient.
  Run fp16 = sgd;
  fp16.options.compression = herd::Compression::kFP16;
  equivalence(ctx, "fp16 compression (sgd)", fp16, 3e-3, 18);
  Run fp16adam = adam;
  fp16adam.options.compression = herd::Compression::kFP16;
  fp16adam.options.backward_passes_per_step = 2;
  equivalence(ctx, "fp16 compression with 2 passes (adam)", fp16adam, 3e-3, 19);

  Run forgot = sgd;
  forgot.report = 1;
  equivalence(ctx, "a forgotten grad_ready is still reduced by step()", forgot, kFloatTol, 20);
  Run none = adam;
  none.report = 2;
  none.options.backward_passes_per_step = 2;
  equivalence(ctx, "no grad_ready at all: step() reduces everything", none, kFloatTol, 21);

  // With op sum a second reduction would multiply by the rank count again.
  Run sync = sum;
  sync.report = 3;
  equivalence(ctx, "synchronize() then step() reduces once", sync, kFloatTol, 22);

  Run prefixed = sgd;
  prefixed.options.name_prefix = "other";
  equivalence(ctx, "name prefix", prefixed, kFloatTol, 23);
}

void broadcast_cases(const Ctx& ctx) {
  const int root = ctx.size - 1;
  {
    CaseCheck check(ctx.rec, "broadcast_parameters makes the ranks identical");
    try {
      Model model(100 + static_cast<uint64_t>(ctx.rank));  // different on every rank
      model.b = static_cast<float>(ctx.rank) - 0.25f;
      Model roots(100 + static_cast<uint64_t>(root));
      roots.b = static_cast<float>(root) - 0.25f;
      herd::broadcast_parameters(model.params, root);
      const std::vector<float> got = flat(model), want = flat(roots);
      for (std::size_t i = 0; i < want.size(); ++i) {
        if (got[i] != want[i]) {
          check.mismatch(static_cast<int64_t>(i), double_string(want[i]), double_string(got[i]));
        }
      }
    } catch (const std::exception& e) {
      check.fail(std::string("exception: ") + e.what());
    }
  }
  {
    CaseCheck check(ctx.rec, "broadcast_optimizer_state makes the states identical");
    try {
      // Every rank trains alone (no communication) on its own data for
      // rank + 1 steps, so states and step counts differ.
      Model model(200);
      herd::AdamOptions options;
      options.lr = 0.01;
      herd::Adam adam(options);
      for (int s = 0; s <= ctx.rank; ++s) {
        model.zero_grad();
        model.accumulate(1000 * ctx.rank + 10 * s, kPerRank, 7);
        adam.step(model.params);
      }
      herd::broadcast_parameters(model.params, 0);
      herd::broadcast_optimizer_state(adam, model.params, 0);
      if (adam.step_count() != 1) {
        check.fail("step count " + std::to_string(adam.step_count()) + ", root's is 1");
      }
      const herd::OptimizerState state = adam.export_state();
      std::vector<float> all;
      for (const herd::StateBuffer& buffer : state.buffers) {
        all.insert(all.end(), buffer.values.begin(), buffer.values.end());
      }
      check_identical(check, all, "state");
      // Then training together stays identical on every rank.
      herd::DistributedOptimizer opt(adam, model.params);
      for (int s = 0; s < 3; ++s) {
        model.zero_grad();
        model.accumulate(5000 + (s * ctx.size + ctx.rank) * kPerRank, kPerRank, 7);
        opt.grad_ready(model.params[0]);
        opt.grad_ready(model.params[1]);
        opt.step();
      }
      if (adam.step_count() != 4) {
        check.fail("step count " + std::to_string(adam.step_count()) + " after 3 more, not 4");
      }
      check_identical(check, flat(model), "after state broadcast");
    } catch (const std::exception& e) {
      check.fail(std::string("exception: ") + e.what());
    }
  }
  {
    CaseCheck check(ctx.rec, "broadcast_optimizer_state of a fresh optimizer");
    try {
      Model model(300);
      herd::SGDOptions options;
      options.momentum = 0.9;
      herd::SGD sgd(options);
      herd::broadcast_optimizer_state(sgd, model.params, root);
      const herd::OptimizerState state = sgd.export_state();
      if (state.step != 0 || state.buffers.size() != 2) {
        check.fail("step " + std::to_string(state.step) + ", " +
                   std::to_string(state.buffers.size()) + " buffers");
      }
    } catch (const std::exception& e) {
      check.fail(std::string("exception: ") + e.what());
    }
  }
  {
    CaseCheck check(ctx.rec, "broadcast_parameters with different parameters throws on every rank");
    std::vector<float> a(3, 1.0f), ga(3), c(ctx.rank == 0 ? 4 : 3, 2.0f), gc(c.size());
    std::vector<herd::Parameter> params = {
        herd::Parameter("a", a.data(), ga.data(), 3),
        herd::Parameter("c", c.data(), gc.data(), static_cast<int64_t>(c.size()))};
    const std::string error = error_of([&] { herd::broadcast_parameters(params, 0); });
    const bool want_error = ctx.size > 1;
    if (want_error !=
        (error.find("do not all hold the same parameter names and sizes") != std::string::npos)) {
      check.fail("error: " + error);
    }
  }
}

void error_cases(const Ctx& ctx) {
  Model model(400);
  herd::SGD sgd(herd::SGDOptions{});
  auto expect = [&](const std::string& name, const std::function<void()>& run,
                    const std::string& part) {
    const std::string error = error_of(run);
    ctx.rec.check(error.find(part) != std::string::npos, name,
                  "expected an error containing \"" + part + "\", got: " + error);
  };
  auto with = [&](const std::function<void(herd::DistributedOptimizerOptions&)>& set) {
    herd::DistributedOptimizerOptions o;
    set(o);
    return [&sgd, &model, o] { herd::DistributedOptimizer opt(sgd, model.params, o); };
  };
  expect("backward_passes_per_step 0", with([](auto& o) { o.backward_passes_per_step = 0; }),
         "backward_passes_per_step 0");
  expect("gradient_predivide_factor 0", with([](auto& o) { o.gradient_predivide_factor = 0; }),
         "gradient_predivide_factor 0");
  expect("predivide with sum", with([](auto& o) {
           o.op = herd::ReduceOp::kSum;
           o.gradient_predivide_factor = 2;
         }),
         "needs op average");
  expect("op max", with([](auto& o) { o.op = herd::ReduceOp::kMax; }), "op max");
  expect(
      "a parameter twice",
      [&] {
        std::vector<herd::Parameter> twice = {model.params[0], model.params[0]};
        herd::DistributedOptimizer opt(sgd, twice);
      },
      "'linear.weight' is given twice");
  {
    herd::DistributedOptimizer opt(sgd, model.params);
    expect(
        "unknown parameter", [&] { opt.grad_ready("nope"); }, "parameter 'nope'");
    expect(
        "reported twice",
        [&] {
          opt.grad_ready("linear.bias");
          opt.grad_ready("linear.bias");
        },
        "'linear.bias' was already reported");
    opt.step();  // completes the step begun above (every rank does the same)
    expect(
        "grad_ready after synchronize",
        [&] {
          opt.synchronize();
          opt.grad_ready(model.params[0]);
        },
        "'linear.weight' after synchronize()");
    opt.step();
  }
  {
    herd::DistributedOptimizerOptions o;
    o.backward_passes_per_step = 2;
    herd::DistributedOptimizer opt(sgd, model.params, o);
    expect(
        "synchronize on a non-final pass", [&] { opt.synchronize(); }, "pass 1 of 2");
  }
}

// A checkpoint records the job's rank count, and resuming under
// DistributedOptimizer at another count is refused on every rank, naming
// both counts; at the same count it applies.
void checkpoint_rank_cases(const Ctx& ctx) {
  Model model(500);
  herd::SGD sgd(herd::SGDOptions{});
  herd::DistributedOptimizer opt(sgd, model.params);
  herd::Checkpoint checkpoint = herd::make_checkpoint(model.params, sgd, 0, 0, 0);
  ctx.rec.check(checkpoint.ranks == ctx.size, "checkpoint ranks",
                "make_checkpoint recorded " + std::to_string(checkpoint.ranks) +
                    " ranks in a job of " + std::to_string(ctx.size));
  const std::string same = error_of([&] { herd::apply_checkpoint(checkpoint, model.params, sgd); });
  ctx.rec.check(same == "(no error)", "checkpoint of this rank count",
                "apply_checkpoint threw: " + same);
  checkpoint.ranks = ctx.size + 1;
  const std::string expected =
      "checkpoint mismatch: the checkpoint was written by a run of " +
      std::to_string(ctx.size + 1) + " ranks, but this run has " + std::to_string(ctx.size) +
      "; resuming at another number of ranks is refused (each rank's data shard and the "
      "learning-rate scaling depend on it): resume with " +
      std::to_string(ctx.size + 1) + " ranks";
  const std::string other =
      error_of([&] { herd::apply_checkpoint(checkpoint, model.params, sgd); });
  ctx.rec.check(other == expected, "checkpoint of another rank count",
                "expected \"" + expected + "\", got \"" + other + "\"");
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_distributed_optimizer", world.rank);
  try {
    herd::init();
    const Ctx ctx{rec, herd::rank(), herd::size()};
    equivalence_cases(ctx);
    broadcast_cases(ctx);
    error_cases(ctx);
    checkpoint_rank_cases(ctx);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("run", std::string("exception: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
