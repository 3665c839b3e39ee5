// The store's optimizer (kvstore/update_store.h through the local KVStore):
// updates against scalar references of SGD with momentum and Adam written
// here in double, rescale_grad, the schedule's clock (MXNet's num_update),
// dtype refusals, and the optimizer states' save/load round trip and its
// refusals.
#include <cmath>
#include <cstdint>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/kvstore.h"
#include "herd/train/checkpoint.h"
#include "kvstore/optimizer_config_codec.h"
#include "tests/unit/kvstore/kvstore_test_util.h"

namespace herd {
namespace kv {
namespace {

using test::check_throws_with;

const std::vector<float> kStart = {0.5f, -1.25f, 2.0f, 0.75f};

// The gradient of step t (0-based), element i: varies with both.
double grad_at(int t, std::size_t i) { return 0.1 * (t + 1) - 0.2 * static_cast<double>(i) + 0.05; }

std::vector<float> grad_vector(int t, double scale = 1.0) {
  std::vector<float> g(kStart.size());
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(grad_at(t, i) * scale);
  return g;
}

TensorView view_of(std::vector<float>& v) {
  return TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}};
}

// Pushes grad_vector(t, push_scale) for t in [0, steps) to key 0 and returns
// the pulled value after every step.
std::vector<std::vector<float>> run_store(KVStore& kv, int steps, double push_scale = 1.0) {
  std::vector<std::vector<float>> history;
  for (int t = 0; t < steps; ++t) {
    std::vector<float> g = grad_vector(t, push_scale);
    kv.push(0, view_of(g));
    std::vector<float> out(kStart.size());
    kv.pull(0, view_of(out));
    history.push_back(out);
  }
  return history;
}

void check_close(const std::vector<float>& actual, const std::vector<double>& expected,
                 const std::string& what) {
  REQUIRE(actual.size() == expected.size());
  for (std::size_t i = 0; i < actual.size(); ++i) {
    INFO(what << " element " << i << ": expected " << expected[i] << ", got " << actual[i]);
    CHECK(actual[i] == Approx(expected[i]).epsilon(1e-5).margin(1e-7));
  }
}

TEST_CASE("optimizer: SGD with momentum and weight decay against a scalar reference", "[kvstore]") {
  OptimizerConfig config;
  config.sgd = SGDOptions{0.1, 0.9, 0.0, 0.01, false};
  config.rescale_grad = 0.5;
  auto kv = create("local");
  std::vector<float> start = kStart;
  kv->init(0, view_of(start));
  kv->set_optimizer(config);
  const auto history = run_store(*kv, 5);

  std::vector<double> w(kStart.begin(), kStart.end()), b(w.size(), 0.0);
  for (int t = 0; t < 5; ++t) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double g = 0.5 * grad_at(t, i) + 0.01 * w[i];
      b[i] = t == 0 ? g : 0.9 * b[i] + g;
      w[i] -= 0.1 * b[i];
    }
    check_close(history[t], w, "step " + std::to_string(t));
  }
  REQUIRE(start == kStart);  // init copied the value; the caller's array is untouched
}

TEST_CASE("optimizer: Adam and AdamW against a scalar reference", "[kvstore]") {
  for (auto kind : {OptimizerConfig::Kind::kAdam, OptimizerConfig::Kind::kAdamW}) {
    const bool decoupled = kind == OptimizerConfig::Kind::kAdamW;
    INFO((decoupled ? "adamw" : "adam"));
    OptimizerConfig config;
    config.kind = kind;
    config.adam = AdamOptions{0.01, 0.9, 0.999, 1e-8, 0.1, false};
    auto kv = create("local");
    std::vector<float> start = kStart;
    kv->init(0, view_of(start));
    kv->set_optimizer(config);
    const auto history = run_store(*kv, 4);

    std::vector<double> w(kStart.begin(), kStart.end()), m(w.size(), 0.0), v(w.size(), 0.0);
    for (int t = 0; t < 4; ++t) {
      const int step = t + 1;
      for (std::size_t i = 0; i < w.size(); ++i) {
        double g = grad_at(t, i);
        if (decoupled) {
          w[i] *= 1 - 0.01 * 0.1;
        } else {
          g += 0.1 * w[i];
        }
        m[i] = 0.9 * m[i] + 0.1 * g;
        v[i] = 0.999 * v[i] + 0.001 * g * g;
        const double m_hat = m[i] / (1 - std::pow(0.9, step));
        const double v_hat = v[i] / (1 - std::pow(0.999, step));
        w[i] -= 0.01 * m_hat / (std::sqrt(v_hat) + 1e-8);
      }
      check_close(history[t], w, "step " + std::to_string(t));
    }
  }
}

TEST_CASE("optimizer: the rescaled gradient is the store's copy; the push is untouched",
          "[kvstore]") {
  OptimizerConfig config;
  config.sgd = SGDOptions{1.0, 0, 0, 0.5, false};  // weight decay writes into the gradient
  config.rescale_grad = 0.25;
  auto kv = create("local");
  std::vector<float> start = {1, 2};
  kv->init(0, view_of(start));
  kv->set_optimizer(config);
  std::vector<float> g = {4, 8}, out(2);
  kv->push(0, view_of(g));
  REQUIRE(g == std::vector<float>{4, 8});
  kv->pull(0, view_of(out));
  // w - lr * (rescale * g + wd * w) = 1 - (1 + 0.5), 2 - (2 + 1)
  REQUIRE(out == std::vector<float>{-0.5f, -1.0f});
}

TEST_CASE("optimizer: the schedule reads MXNet's update count, the same for every key of a step",
          "[kvstore]") {
  // Plain SGD, lr = 0.5^t: each key moves by 0.5^t * 1 at step t, whatever
  // the order of the keys in the push.
  OptimizerConfig config;
  config.sgd = SGDOptions{123.0, 0, 0, 0, false};  // overridden by the schedule
  config.schedule = StepDecay{1.0, 1.0, 0.5, {}};
  auto kv = create("local");
  std::vector<float> a = {0}, b = {0};
  kv->init(std::vector<Key>{1, 2}, {view_of(a), view_of(b)});
  kv->set_optimizer(config);
  std::vector<float> one = {1};
  double expected = 0;
  for (int t = 0; t < 4; ++t) {
    const std::vector<Key> order = t % 2 ? std::vector<Key>{2, 1} : std::vector<Key>{1, 2};
    kv->push(order, {{view_of(one)}, {view_of(one)}});
    expected -= std::pow(0.5, t);
    kv->pull(std::vector<Key>{1, 2}, {{view_of(a)}, {view_of(b)}});
    INFO("step " << t);
    REQUIRE(a[0] == static_cast<float>(expected));
    REQUIRE(b[0] == static_cast<float>(expected));
    REQUIRE(kv->update_counts() == std::vector<int64_t>{t + 1});
  }
  // A key pushed alone catches up with the store's count: key 1 at its 5th
  // update sees t = 4, key 2 then too (num_update is the largest count).
  kv->push(1, view_of(one));
  kv->push(2, view_of(one));
  expected -= std::pow(0.5, 4);
  kv->pull(std::vector<Key>{1, 2}, {{view_of(a)}, {view_of(b)}});
  REQUIRE(a[0] == static_cast<float>(expected));
  REQUIRE(b[0] == static_cast<float>(expected));
}

TEST_CASE("optimizer: refusals (dtype, invalid options, horovod-style misuse)", "[kvstore]") {
  auto kv = create("local");
  std::vector<double> d = {1, 2};
  const TensorView dv{d.data(), DataType::kFloat64, {2}};
  kv->init("counts", dv);
  OptimizerConfig config;
  kv->set_optimizer(config);
  check_throws_with([&] { kv->push("counts", dv); },
                    {"kvstore 'local'", "\"counts\"", "float64", "float32", "sgd"});
  OptimizerConfig bad;
  bad.sgd.lr = -1;
  check_throws_with([&] { kv->set_optimizer(bad); }, {"kvstore 'local'", "-1"});
  OptimizerConfig bad_rescale;
  bad_rescale.rescale_grad = NAN;
  check_throws_with([&] { kv->set_optimizer(bad_rescale); }, {"kvstore 'local'", "rescale_grad"});
  // An updater replaces the optimizer: float64 is fine then.
  kv->set_updater([](const Key&, const TensorView& merged, TensorView stored) {
    static_cast<double*>(stored.data)[0] += static_cast<const double*>(merged.data)[0];
  });
  kv->push("counts", dv);
  std::vector<double> out(2);
  kv->pull("counts", TensorView{out.data(), DataType::kFloat64, {2}});
  REQUIRE(out == std::vector<double>{2, 2});
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name)
      : path("/tmp/herd_kvstore_test_" + name + "_" + std::to_string(::getpid())) {}
  ~TempFile() { std::remove(path.c_str()); }
};

OptimizerConfig momentum_with_schedule() {
  OptimizerConfig config;
  config.kind = OptimizerConfig::Kind::kAdam;
  config.adam = AdamOptions{0.01, 0.8, 0.99, 1e-8, 0.01, false};
  config.schedule = CosineDecay{0.05, 10.0, 0.001, {2.0, 0.1}};
  config.rescale_grad = 0.5;
  return config;
}

TEST_CASE("optimizer states: save, load, continue bitwise as the run that never stopped",
          "[kvstore]") {
  TempFile file("states");
  for (bool dump : {false, true}) {
    INFO("dump_optimizer " << dump);
    // The run that never stops: 6 steps.
    auto whole = create("local");
    std::vector<float> w1 = kStart;
    whole->init(0, view_of(w1));
    whole->set_optimizer(momentum_with_schedule());
    const auto expected = run_store(*whole, 6);

    // 3 steps, save; a new store with the weights at step 3 loads and runs
    // steps 3..5.
    auto first = create("local");
    std::vector<float> w2 = kStart;
    first->init(0, view_of(w2));
    first->set_optimizer(momentum_with_schedule());
    const auto head = run_store(*first, 3);
    first->save_optimizer_states(file.path, dump);

    auto second = create("local");
    std::vector<float> w3 = head.back();
    second->init(0, view_of(w3));
    if (!dump) second->set_optimizer(momentum_with_schedule());
    second->load_optimizer_states(file.path);
    REQUIRE(second->update_counts() == std::vector<int64_t>{3});
    for (int t = 3; t < 6; ++t) {
      std::vector<float> g = grad_vector(t);
      second->push(0, view_of(g));
      std::vector<float> out(kStart.size());
      second->pull(0, view_of(out));
      INFO("step " << t);
      REQUIRE(out == expected[t]);
    }
  }
}

TEST_CASE("optimizer states: refusals name the file and what differs", "[kvstore]") {
  TempFile file("refusals");
  auto kv = create("local");
  std::vector<float> w = kStart;
  kv->init(0, view_of(w));
  check_throws_with([&] { kv->save_optimizer_states(file.path); },
                    {"kvstore 'local'", file.path, "no optimizer"});
  kv->set_optimizer(momentum_with_schedule());
  run_store(*kv, 2);
  kv->save_optimizer_states(file.path);

  auto no_optimizer = create("local");
  no_optimizer->init(0, view_of(w));
  check_throws_with([&] { no_optimizer->load_optimizer_states(file.path); },
                    {"kvstore 'local'", file.path, "no optimizer", "dump_optimizer"});

  auto sgd = create("local");
  sgd->init(0, view_of(w));
  sgd->set_optimizer(OptimizerConfig{});
  check_throws_with([&] { sgd->load_optimizer_states(file.path); },
                    {"kvstore 'local'", file.path, "adam", "sgd"});

  auto other_key = create("local");
  other_key->init(7, view_of(w));
  other_key->set_optimizer(momentum_with_schedule());
  check_throws_with([&] { other_key->load_optimizer_states(file.path); },
                    {"kvstore 'local'", file.path, "key 0", "not initialised"});

  std::vector<float> longer = {1, 2, 3, 4, 5};
  auto other_size = create("local");
  other_size->init(0, view_of(longer));
  other_size->set_optimizer(momentum_with_schedule());
  check_throws_with([&] { other_size->load_optimizer_states(file.path); },
                    {"kvstore 'local'", file.path, "key 0", "4 elements in the file, 5"});

  // A training checkpoint is a herd checkpoint, but not a store's states.
  save_checkpoint(file.path, Checkpoint{});
  check_throws_with([&] { kv->load_optimizer_states(file.path); },
                    {"kvstore 'local'", file.path, "not a KVStore's optimizer states"});
  check_throws_with([&] { kv->load_optimizer_states(file.path + ".missing"); },
                    {"kvstore 'local'", file.path + ".missing"});
}

TEST_CASE("optimizer config codec: every field round-trips exactly", "[kvstore]") {
  OptimizerConfig config = momentum_with_schedule();
  config.schedule = MultiStepDecay{0.1, {3, 5.5, 1e10}, 0.3, {1.0 / 3, 0.25}};
  const auto fields = detail::encode_optimizer_config(config, "p.");
  const OptimizerConfig back = detail::decode_optimizer_config(fields, "p.");
  REQUIRE(detail::encode_optimizer_config(back, "p.") == fields);
  const auto& steps = std::get<MultiStepDecay>(*back.schedule);
  REQUIRE(steps.milestones == std::vector<double>{3, 5.5, 1e10});
  REQUIRE(steps.warmup.duration == 1.0 / 3);
  auto broken = fields;
  broken["p.adam.beta1"] = "0.9x";
  check_throws_with([&] { detail::decode_optimizer_config(broken, "p."); },
                    {"p.adam.beta1", "0.9x"});
  broken.erase("p.adam.beta1");
  check_throws_with([&] { detail::decode_optimizer_config(broken, "p."); },
                    {"p.adam.beta1", "missing"});
}

}  // namespace
}  // namespace kv
}  // namespace herd
