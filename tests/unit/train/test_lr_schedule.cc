// Learning-rate schedules against their closed forms, written out here
// again, at steps on both sides of every boundary (end of warm-up,
// milestones, total).
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/lr_schedule.h"

namespace herd {
namespace {

const double kPi = std::acos(-1.0);

TEST_CASE("linear warm-up ramps from start_factor * base to base", "[lr_schedule]") {
  const ConstantLr c{0.4, LinearWarmup{5, 0.25}};
  CHECK(learning_rate_at(c, 0) == Approx(0.1));                            // 0.4 * 0.25
  CHECK(learning_rate_at(c, 1) == Approx(0.4 * (0.25 + 0.75 * 1 / 5.0)));  // 0.16
  CHECK(learning_rate_at(c, 2.5) == Approx(0.4 * (0.25 + 0.75 * 0.5)));    // 0.25
  CHECK(learning_rate_at(c, 4.999) == Approx(0.4 * (0.25 + 0.75 * 4.999 / 5)));
  CHECK(learning_rate_at(c, 5) == 0.4);
  CHECK(learning_rate_at(c, 100) == 0.4);
  CHECK(learning_rate_at(ConstantLr{0.4, {}}, 0) == 0.4);  // no warm-up
  CHECK(learning_rate_at(ConstantLr{0.4, LinearWarmup{4, 0}}, 0) == 0.0);
  CHECK(learning_rate_at(ConstantLr{0.4, LinearWarmup{4, 0}}, 1) == Approx(0.1));
}

TEST_CASE("step decay: base * gamma^floor(t / step_size)", "[lr_schedule]") {
  StepDecay s;
  s.base_lr = 0.1;
  s.step_size = 30;
  s.gamma = 0.1;
  CHECK(learning_rate_at(s, 0) == 0.1);
  CHECK(learning_rate_at(s, 29) == 0.1);
  CHECK(learning_rate_at(s, 29.99) == 0.1);
  CHECK(learning_rate_at(s, 30) == Approx(0.01));
  CHECK(learning_rate_at(s, 59) == Approx(0.01));
  CHECK(learning_rate_at(s, 60) == Approx(0.001));
  CHECK(learning_rate_at(s, 95) == Approx(1e-4));
  // With warm-up: the ramp first, then the same absolute boundaries.
  s.warmup = LinearWarmup{5, 0.5};
  CHECK(learning_rate_at(s, 0) == Approx(0.05));
  CHECK(learning_rate_at(s, 4) == Approx(0.1 * (0.5 + 0.5 * 4 / 5.0)));
  CHECK(learning_rate_at(s, 5) == 0.1);
  CHECK(learning_rate_at(s, 30) == Approx(0.01));
}

TEST_CASE("multi-step decay: base * gamma^(milestones passed)", "[lr_schedule]") {
  MultiStepDecay s;
  s.base_lr = 0.8;
  s.milestones = {30, 60, 80};
  s.gamma = 0.5;
  const std::vector<std::pair<double, double>> expected = {
      {0, 0.8}, {29, 0.8}, {30, 0.4}, {59.5, 0.4}, {60, 0.2}, {79, 0.2}, {80, 0.1}, {1000, 0.1}};
  for (const auto& [t, lr] : expected) {
    INFO("t = " << t);
    CHECK(learning_rate_at(s, t) == Approx(lr));
  }
  s.milestones = {10, 10};  // a repeated milestone counts twice, as in torch
  CHECK(learning_rate_at(s, 10) == Approx(0.2));
  s.milestones = {};
  CHECK(learning_rate_at(s, 50) == 0.8);
  s.milestones = {30, 60};
  s.warmup = LinearWarmup{5, 0.125};  // the large-batch recipe at 8 ranks
  CHECK(learning_rate_at(s, 0) == Approx(0.1));
  CHECK(learning_rate_at(s, 2.5) == Approx(0.8 * (0.125 + 0.875 * 0.5)));
  CHECK(learning_rate_at(s, 5) == 0.8);
  CHECK(learning_rate_at(s, 30) == Approx(0.4));
}

TEST_CASE("cosine decay from the end of warm-up to min_lr at total", "[lr_schedule]") {
  CosineDecay s;
  s.base_lr = 1.0;
  s.total = 100;
  s.min_lr = 0.1;
  auto closed = [](double t, double w, double total) {
    return 0.1 + 0.9 * (1 + std::cos(kPi * (t - w) / (total - w))) / 2;
  };
  for (double t : {0.0, 1.0, 25.0, 50.0, 75.0, 99.0, 100.0}) {
    INFO("t = " << t);
    CHECK(learning_rate_at(s, t) == Approx(closed(t, 0, 100)));
  }
  CHECK(learning_rate_at(s, 50) == Approx(0.55));
  CHECK(learning_rate_at(s, 100) == Approx(0.1));
  CHECK(learning_rate_at(s, 150) == Approx(0.1));  // stays at the floor
  s.warmup = LinearWarmup{10, 0};
  CHECK(learning_rate_at(s, 0) == 0.0);
  CHECK(learning_rate_at(s, 5) == Approx(0.5));
  CHECK(learning_rate_at(s, 10) == Approx(1.0));
  for (double t : {10.0, 11.0, 55.0, 99.0, 100.0}) {
    INFO("t = " << t);
    CHECK(learning_rate_at(s, t) == Approx(closed(t, 10, 100)));
  }
  CHECK(learning_rate_at(s, 55) == Approx(0.55));  // halfway through the decay
}

TEST_CASE("polynomial decay from the end of warm-up to end_lr at total", "[lr_schedule]") {
  PolynomialDecay s;
  s.base_lr = 0.5;
  s.total = 10;
  s.power = 2;
  CHECK(learning_rate_at(s, 0) == 0.5);
  CHECK(learning_rate_at(s, 5) == Approx(0.5 * 0.25));
  CHECK(learning_rate_at(s, 9) == Approx(0.5 * 0.01));
  CHECK(learning_rate_at(s, 10) == 0.0);
  CHECK(learning_rate_at(s, 12) == 0.0);
  s.power = 1;
  s.end_lr = 0.1;
  CHECK(learning_rate_at(s, 5) == Approx(0.1 + 0.4 * 0.5));
  CHECK(learning_rate_at(s, 10) == Approx(0.1));
  s.warmup = LinearWarmup{2, 0.5};
  CHECK(learning_rate_at(s, 0) == Approx(0.25));
  CHECK(learning_rate_at(s, 1) == Approx(0.375));
  CHECK(learning_rate_at(s, 2) == Approx(0.5));
  CHECK(learning_rate_at(s, 6) == Approx(0.1 + 0.4 * (1 - 4 / 8.0)));
  CHECK(learning_rate_at(s, 10) == Approx(0.1));
}

TEST_CASE("LrSchedule dispatches to the schedule it holds", "[lr_schedule]") {
  StepDecay step;
  step.base_lr = 1;
  step.step_size = 2;
  step.gamma = 0.5;
  const LrSchedule schedule = step;
  CHECK(learning_rate_at(schedule, 4) == Approx(0.25));
  CHECK(learning_rate_at(LrSchedule{ConstantLr{0.3, {}}}, 7) == 0.3);
}

TEST_CASE("the large-batch recipe scales by the ranks and warms up from 1/n", "[lr_schedule]") {
  CHECK(scaled_learning_rate(0.1, 8) == Approx(0.8));
  CHECK(scaled_learning_rate(0.1, 1) == 0.1);
  const LinearWarmup w = large_batch_warmup(4, 5);
  CHECK(w.duration == 5);
  CHECK(w.start_factor == 0.25);
  // Starts at the single-rank rate, ends at the scaled one.
  const ConstantLr c{scaled_learning_rate(0.1, 4), w};
  CHECK(learning_rate_at(c, 0) == Approx(0.1));
  CHECK(learning_rate_at(c, 5) == Approx(0.4));
  CHECK_THROWS_WITH(scaled_learning_rate(0.1, 0), Catch::Contains("num_ranks 0"));
  CHECK_THROWS_WITH(large_batch_warmup(-2, 5), Catch::Contains("num_ranks -2"));
}

TEST_CASE("invalid schedules and positions are refused, naming the value", "[lr_schedule]") {
  CHECK_THROWS_WITH(learning_rate_at(ConstantLr{0.1, {}}, -1), Catch::Contains("-1"));
  CHECK_THROWS_WITH(learning_rate_at(ConstantLr{-0.1, {}}, 0), Catch::Contains("base_lr -0.1"));
  CHECK_THROWS_WITH(learning_rate_at(ConstantLr{0.1, LinearWarmup{5, 1.5}}, 0),
                    Catch::Contains("start_factor") && Catch::Contains("1.5"));
  StepDecay step;
  step.step_size = 0;
  CHECK_THROWS_WITH(learning_rate_at(step, 0), Catch::Contains("step_size 0"));
  MultiStepDecay multi;
  multi.milestones = {30, 20};
  CHECK_THROWS_WITH(learning_rate_at(multi, 0), Catch::Contains("20") && Catch::Contains("30"));
  CosineDecay cosine;
  cosine.total = 5;
  cosine.warmup = LinearWarmup{5, 0};
  CHECK_THROWS_WITH(learning_rate_at(cosine, 1),  // refused inside the warm-up too
                    Catch::Contains("total") && Catch::Contains("5"));
  PolynomialDecay poly;
  poly.power = 0;
  CHECK_THROWS_WITH(learning_rate_at(poly, 0), Catch::Contains("power 0"));
}

}  // namespace
}  // namespace herd
