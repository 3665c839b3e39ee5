// Optimizer state: export, import into a fresh optimizer and continue
// bitwise identically; refuse mismatched state and parameter sets, naming
// the buffer or parameter and both sizes.
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/optimizer.h"
#include "tests/unit/train/optimizer_test_util.h"

namespace herd {
namespace {

using test::OwnedParam;

using Model = test::TinyModel;

using test::bitwise_equal;

using Factory = std::function<std::unique_ptr<Optimizer>()>;

// Runs 3 + 4 steps straight, and 3 steps then export, import into a fresh
// optimizer on a copy of the model, and 4 more steps: both must agree bit
// for bit, as a resumed training run must.
void check_resume_is_bitwise(const Factory& make) {
  Model straight;
  auto opt = make();
  straight.train(*opt, 1, 3);
  Model resumed = straight;
  const OptimizerState saved = opt->export_state();
  CHECK(saved.step == 3);
  straight.train(*opt, 4, 7);
  auto fresh = make();
  fresh->init_state(resumed.params());
  fresh->import_state(saved);
  CHECK(fresh->step_count() == 3);
  resumed.train(*fresh, 4, 7);
  CHECK(bitwise_equal(resumed.weight.value, straight.weight.value));
  CHECK(bitwise_equal(resumed.bias.value, straight.bias.value));
  const OptimizerState a = opt->export_state(), b = fresh->export_state();
  REQUIRE(a.buffers.size() == b.buffers.size());
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    CHECK(a.buffers[i].name == b.buffers[i].name);
    CHECK(bitwise_equal(a.buffers[i].values, b.buffers[i].values));
  }
}

TEST_CASE("exported state resumes bitwise identically", "[state]") {
  SECTION("SGD with Nesterov momentum and weight decay") {
    check_resume_is_bitwise([] {
      SGDOptions o;
      o.lr = 0.1;
      o.momentum = 0.9;
      o.nesterov = true;
      o.weight_decay = 1e-2;
      return std::make_unique<SGD>(o);
    });
  }
  SECTION("Adam") {
    check_resume_is_bitwise([] { return std::make_unique<Adam>(AdamOptions{}); });
  }
  SECTION("AdamW") {
    check_resume_is_bitwise([] {
      AdamOptions o;
      o.weight_decay = 1e-2;
      o.decoupled_weight_decay = true;
      return std::make_unique<Adam>(o);
    });
  }
}

TEST_CASE("importing the state of an optimizer that never stepped", "[state]") {
  // The shape of a broadcast before training: rank 0 exports zeroed buffers
  // and step 0; the receiver's first step must still start the momentum
  // buffer at the gradient (torch's first-step rule).
  Model a, b;
  SGDOptions o;
  o.lr = 0.1;
  o.momentum = 0.9;
  o.dampening = 0.5;
  SGD sender(o), receiver(o);
  sender.init_state(a.params());
  const OptimizerState zero = sender.export_state();
  CHECK(zero.step == 0);
  REQUIRE(zero.buffers.size() == 2);
  CHECK(zero.buffers[0].name == "fc1.weight/momentum");
  CHECK(zero.buffers[1].name == "fc1.bias/momentum");
  receiver.init_state(b.params());
  receiver.import_state(zero);
  a.fill_grads(1);
  b.fill_grads(1);
  sender.step(a.params());
  receiver.step(b.params());
  CHECK(bitwise_equal(a.weight.value, b.weight.value));
  CHECK(bitwise_equal(receiver.export_state().buffers[0].values, a.weight.grad));
}

TEST_CASE("mismatched state is refused with names and sizes, changing nothing", "[state]") {
  Model m;
  Adam adam(AdamOptions{});
  m.fill_grads(1);
  adam.step(m.params());
  const OptimizerState good = adam.export_state();

  Adam fresh(AdamOptions{});
  CHECK_THROWS_WITH(fresh.import_state(good), Catch::Contains("init_state"));
  fresh.init_state(m.params());

  OptimizerState bad = good;
  bad.buffers[1].values.resize(5);  // fc1.weight/exp_avg_sq has 6
  CHECK_THROWS_WITH(fresh.import_state(bad), Catch::Contains("fc1.weight/exp_avg_sq") &&
                                                 Catch::Contains("5") && Catch::Contains("6"));
  bad = good;
  bad.buffers[2].name = "fc2.bias/exp_avg";
  CHECK_THROWS_WITH(fresh.import_state(bad), Catch::Contains("fc2.bias/exp_avg"));
  bad = good;
  bad.buffers.pop_back();
  CHECK_THROWS_WITH(fresh.import_state(bad),
                    Catch::Contains("fc1.bias/exp_avg_sq") && Catch::Contains("missing"));
  bad = good;
  bad.buffers.push_back(good.buffers[0]);
  CHECK_THROWS_WITH(fresh.import_state(bad), Catch::Contains("twice"));
  bad = good;
  bad.step = -1;
  CHECK_THROWS_WITH(fresh.import_state(bad), Catch::Contains("-1"));

  // None of the refused imports changed anything.
  CHECK(fresh.step_count() == 0);
  for (const StateBuffer& buffer : fresh.export_state().buffers) {
    for (float x : buffer.values) CHECK(x == 0.0f);
  }

  // An SGD state does not fit an Adam optimizer.
  SGDOptions so;
  so.momentum = 0.9;
  SGD sgd(so);
  sgd.init_state(m.params());
  CHECK_THROWS_WITH(fresh.import_state(sgd.export_state()), Catch::Contains("fc1.weight/momentum"));
}

TEST_CASE("step and init_state refuse a different parameter set", "[state]") {
  Model m;
  SGD sgd(SGDOptions{});
  sgd.step(m.params());
  CHECK_THROWS_WITH(sgd.step({m.weight.view()}),
                    Catch::Contains("fc1.bias") && Catch::Contains("missing"));
  OwnedParam other("fc2.weight", {1.0f});
  CHECK_THROWS_WITH(sgd.step({m.weight.view(), m.bias.view(), other.view()}),
                    Catch::Contains("fc2.weight"));
  OwnedParam resized("fc1.bias", {1.0f, 2.0f, 3.0f});
  CHECK_THROWS_WITH(sgd.init_state({m.weight.view(), resized.view()}),
                    Catch::Contains("fc1.bias") && Catch::Contains("3") && Catch::Contains("2"));
  CHECK_THROWS_WITH(sgd.step({m.weight.view(), m.weight.view()}), Catch::Contains("twice"));
  CHECK(sgd.step_count() == 1);  // the refused calls did not count
  // Any order is the same set.
  CHECK_NOTHROW(sgd.step({m.bias.view(), m.weight.view()}));
}

// A user's optimizer: only update() and the slot names.
class SignSgd : public Optimizer {
 public:
  explicit SignSgd(double lr) : Optimizer(lr, {"last_sign"}) {}

 protected:
  void update(const Parameter& p, const std::vector<float*>& slots, int64_t step) override {
    for (int64_t i = 0; i < p.size(); ++i) {
      const float sign = p.grad()[i] > 0 ? 1.0f : (p.grad()[i] < 0 ? -1.0f : 0.0f);
      p.value()[i] -= static_cast<float>(learning_rate()) * sign;
      slots[0][i] = sign * static_cast<float>(step);
    }
  }
};

TEST_CASE("a user-defined optimizer gets state handling for free", "[state]") {
  OwnedParam p("w", {1.0f, 1.0f, 1.0f});
  SignSgd opt(0.25);
  p.grad = {2.0f, -3.0f, 0.0f};
  opt.step({p.view()});
  opt.step({p.view()});
  CHECK(p.value == std::vector<float>{0.5f, 1.5f, 1.0f});
  const OptimizerState state = opt.export_state();
  REQUIRE(state.buffers.size() == 1);
  CHECK(state.buffers[0].name == "w/last_sign");
  CHECK(state.buffers[0].values == std::vector<float>{2.0f, -2.0f, 0.0f});
}

}  // namespace
}  // namespace herd
