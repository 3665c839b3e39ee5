// The install test's consumer: a program built against an installed herd
// through find_package(herd), using only <herd/herd.h> (herd::herd) and
// <herd/train.h> (herd::train). Run under mpiexec, it sums a rank-unique
// vector across ranks, then takes one data-parallel SGD step, and checks both
// closed-form results. Exits non-zero on a wrong element or a herd::Error.
#include <cstdint>
#include <cstdio>
#include <vector>

#include <herd/herd.h>
#include <herd/train.h>

namespace {

// One DistributedOptimizer step over plain SGD with learning rate 0.5: every
// rank starts from w[i] = 1, rank r's gradient is r + i, and the step applies
// the mean over ranks, i + (size - 1) / 2. All values are multiples of 1/4,
// exact in float32. Returns the number of wrong elements.
int64_t check_training_step(int rank, int size) {
  const int64_t count = 16;
  std::vector<float> w(count, 1.0f), dw(count);
  for (int64_t i = 0; i < count; ++i) dw[i] = static_cast<float>(rank + i);
  herd::SGDOptions options;
  options.lr = 0.5;
  herd::SGD sgd(options);
  herd::DistributedOptimizer optimizer(sgd,
                                       {herd::Parameter("consumer/w", w.data(), dw.data(), count)});
  optimizer.step();

  int64_t wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    const double expected = 1.0 - 0.5 * (i + (size - 1) / 2.0);
    if (w[i] != expected) {
      if (wrong == 0) {
        std::fprintf(stderr, "consumer rank %d: SGD step: index %lld: expected %g, actual %g\n",
                     rank, static_cast<long long>(i), expected, static_cast<double>(w[i]));
      }
      ++wrong;
    }
  }
  return wrong;
}

}  // namespace

int main() {
  try {
    herd::init();
    const int rank = herd::rank();
    const int size = herd::size();

    // Element i on rank r is r + i, so the sum over ranks is
    // size * i + size * (size - 1) / 2: small integers, exact in float32.
    const int64_t count = 1000;
    std::vector<float> data(count);
    for (int64_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + i);
    herd::TensorView view{data.data(), herd::DataType::kFloat32, {count}};
    herd::allreduce("consumer/gradient", view, view, herd::ReduceOp::kSum);

    int64_t wrong = 0;
    for (int64_t i = 0; i < count; ++i) {
      const double expected = static_cast<double>(size) * i + size * (size - 1) / 2.0;
      if (data[i] != expected) {
        if (wrong == 0) {
          std::fprintf(stderr, "consumer rank %d: index %lld: expected %g, actual %g\n", rank,
                       static_cast<long long>(i), expected, static_cast<double>(data[i]));
        }
        ++wrong;
      }
    }
    const int64_t wrong_step = check_training_step(rank, size);
    herd::shutdown();

    std::printf("consumer rank %d of %d: allreduce %s of %lld %s elements: %s\n", rank, size,
                herd::to_string(herd::ReduceOp::kSum).c_str(), static_cast<long long>(count),
                herd::to_string(herd::DataType::kFloat32).c_str(),
                wrong == 0 ? "correct" : "WRONG");
    std::printf("consumer rank %d of %d: DistributedOptimizer SGD step: %s\n", rank, size,
                wrong_step == 0 ? "correct" : "WRONG");
    return wrong == 0 && wrong_step == 0 ? 0 : 1;
  } catch (const herd::Error& e) {
    std::fprintf(stderr, "consumer: herd::Error: %s\n", e.what());
    return 1;
  }
}
