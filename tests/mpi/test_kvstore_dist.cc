// Multi-rank test of the dist_sync, dist_device_sync and horovod KVStores
// (include/herd/kvstore.h), with MXNet's nightly distributed vectors:
// - pushpull of ones * (rank + 1) from 2 devices = N(N+1)/2 * 2 everywhere,
//   for a small key and a 1200x1200 key;
// - the 1.x test updater w += 2 * g: init ones, push ones * (rank + 1) k
//   times, pull = 1 + 2 * N(N+1)/2 * k after every round;
// - init and broadcast keep rank 0's value when the ranks pass others;
// - with an optimizer (SGD with momentum, Adam) over several rounds, every
//   replica equals a reference computed here in double from the known
//   pushes, and the replicas are bitwise equal across ranks (hashes compared
//   over MPI);
// - 2-bit compression: the pull is the sum over ranks of each rank's
//   dequantized codes, simulated here with every rank's residual; on
//   dist_device_sync each device's value is compressed first, too;
// - horovod: pushpull sums, broadcast is rank 0's, the rest refused;
// - a misuse on one rank fails on that rank alone, before any collective,
//   and the store goes on working on every rank; optimizers that differ
//   between ranks fail every rank.
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "herd/kvstore.h"
#include "mpi_test_util.h"

namespace {

using namespace herd_test;
using herd::kv::Key;
using herd::kv::KVStore;

struct Job {
  Recorder& rec;
  int rank;
  int size;
};

struct Array {
  std::vector<int64_t> shape;
  std::vector<float> values;
  Array(std::vector<int64_t> s, float fill) : shape(std::move(s)) {
    values.assign(static_cast<std::size_t>(num_elements(shape)), fill);
  }
  herd::TensorView view() {
    return herd::TensorView{values.data(), herd::DataType::kFloat32, shape};
  }
};

void expect_all(Job& job, const std::string& name, const Array& array, double expected) {
  CaseCheck check(job.rec, name);
  for (std::size_t i = 0; i < array.values.size(); ++i) {
    if (array.values[i] != expected) {
      check.mismatch(static_cast<int64_t>(i), double_string(expected),
                     double_string(array.values[i]));
    }
  }
}

void expect_error(Job& job, const std::string& name, const std::string& error,
                  const std::vector<std::string>& parts) {
  for (const std::string& part : parts) {
    job.rec.check(error.find(part) != std::string::npos, name,
                  "error '" + error + "' lacks '" + part + "'");
  }
}

// FNV-1a of the bytes; equal on every rank (checked over MPI) when the
// replicas are bitwise equal.
uint64_t hash_bytes(const void* data, std::size_t size) {
  uint64_t hash = 14695981039346656037ull;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ bytes[i]) * 1099511628211ull;
  return hash;
}

void expect_same_on_every_rank(Job& job, const std::string& name, uint64_t hash) {
  unsigned long long mine = hash, low = 0, high = 0;
  MPI_Allreduce(&mine, &low, 1, MPI_UNSIGNED_LONG_LONG, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(&mine, &high, 1, MPI_UNSIGNED_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);
  job.rec.check(low == high, name,
                "replicas differ between ranks (hash " + std::to_string(mine) + " here)");
}

double triangle(int n) { return n * (n + 1) / 2.0; }

// --- dist_sync -----------------------------------------------------------------

void test_pushpull_two_devices(Job& job, const char* type) {
  auto kv = herd::kv::create(type);
  job.rec.check(kv->rank() == job.rank && kv->num_workers() == job.size,
                std::string(type) + " rank/num_workers", "rank or num_workers wrong");
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{2, 3}, {1200, 1200}}) {
    const std::string name = std::string(type) + " pushpull " + shape_string(shape);
    const Key key = shape[0] == 2 ? 3 : 99;
    Array zeros(shape, 0);
    kv->init(key, zeros.view());
    for (int round = 0; round < 2; ++round) {
      Array d0(shape, static_cast<float>(job.rank + 1)), d1 = d0, out(shape, -1);
      kv->pushpull(key, {d0.view(), d1.view()}, {out.view()});
      expect_all(job, name + " round " + std::to_string(round), out, triangle(job.size) * 2);
      expect_all(job, name + " input kept", d0, job.rank + 1);
    }
  }
  // Two rounds of two keys; each allreduce moves 2 (N - 1) / N of its bytes
  // each way on a ring.
  const herd::kv::Stats stats = kv->stats();
  int64_t expected_bytes = 0;
  for (int64_t n : {int64_t{6}, int64_t{1200 * 1200}}) {
    expected_bytes += 2 * (2 * (job.size - 1) * n * 4 / job.size);
  }
  job.rec.check(stats.pushes == 4 && stats.pulls == 4 && stats.bytes_sent == expected_bytes &&
                    stats.bytes_received == expected_bytes,
                std::string(type) + " stats",
                "pushes " + std::to_string(stats.pushes) + " pulls " + std::to_string(stats.pulls) +
                    " bytes sent " + std::to_string(stats.bytes_sent) + " received " +
                    std::to_string(stats.bytes_received) + ", expected 4, 4 and " +
                    std::to_string(expected_bytes));
}

void test_test_updater(Job& job) {
  auto kv = herd::kv::create("dist_sync");
  const double rate = 2;
  kv->set_updater([rate](const Key&, const herd::TensorView& merged, herd::TensorView stored) {
    const auto* g = static_cast<const float*>(merged.data);
    auto* w = static_cast<float*>(stored.data);
    for (int64_t i = 0; i < stored.num_elements(); ++i) w[i] += static_cast<float>(rate) * g[i];
  });
  const std::vector<Key> keys = {"small", "big"};
  Array small({2, 3}, 1), big({1200, 1200}, 1);
  kv->init(keys, {small.view(), big.view()});
  for (int k = 1; k <= 3; ++k) {
    Array gs({2, 3}, static_cast<float>(job.rank + 1)), gb({1200, 1200}, gs.values[0]);
    kv->push(keys, {{gs.view()}, {gb.view()}});
    Array outs({2, 3}, 0), outb({1200, 1200}, 0);
    kv->pull(keys, {{outs.view()}, {outb.view()}});
    const double expected = 1 + rate * triangle(job.size) * k;
    expect_all(job, "test updater small round " + std::to_string(k), outs, expected);
    expect_all(job, "test updater big round " + std::to_string(k), outb, expected);
  }
  job.rec.check(kv->update_counts() == std::vector<int64_t>{3}, "test updater count",
                "update count is not 3");
}

void test_init_takes_rank0(Job& job) {
  auto kv = herd::kv::create("dist_sync");
  Array mine({4}, static_cast<float>(10 * (job.rank + 1))), out({4}, 0);
  kv->init("w", mine.view());
  kv->pull("w", out.view());
  expect_all(job, "init keeps rank 0's value", out, 10);
  Array other({4}, static_cast<float>(job.rank + 5)), o1({4}, 0), o2({4}, 0);
  kv->broadcast("b", other.view(), {o1.view(), o2.view()});
  expect_all(job, "broadcast keeps rank 0's value (first output)", o1, 5);
  expect_all(job, "broadcast keeps rank 0's value (second output)", o2, 5);
}

// Grad of rank r at round t, element i: exact in float, different on every
// rank, round and element.
float grad_of(int r, int t, std::size_t i) {
  return static_cast<float>(0.125 * (r + 1) - 0.0625 * t + 0.03125 * static_cast<double>(i % 7));
}

std::vector<double> sgd_reference(const std::vector<double>& start, int size, int rounds, double lr,
                                  double momentum, double rescale) {
  std::vector<double> w = start, b(w.size(), 0);
  for (int t = 0; t < rounds; ++t) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      double sum = 0;
      for (int r = 0; r < size; ++r) sum += grad_of(r, t, i);
      const double g = rescale * sum;
      b[i] = t == 0 ? g : momentum * b[i] + g;
      w[i] -= lr * b[i];
    }
  }
  return w;
}

std::vector<double> adam_reference(const std::vector<double>& start, int size, int rounds,
                                   const herd::AdamOptions& o) {
  std::vector<double> w = start, m(w.size(), 0), v(w.size(), 0);
  for (int t = 0; t < rounds; ++t) {
    for (std::size_t i = 0; i < w.size(); ++i) {
      double g = 0;
      for (int r = 0; r < size; ++r) g += grad_of(r, t, i);
      m[i] = o.beta1 * m[i] + (1 - o.beta1) * g;
      v[i] = o.beta2 * v[i] + (1 - o.beta2) * g * g;
      const double m_hat = m[i] / (1 - std::pow(o.beta1, t + 1));
      const double v_hat = v[i] / (1 - std::pow(o.beta2, t + 1));
      w[i] -= o.lr * m_hat / (std::sqrt(v_hat) + o.eps);
    }
  }
  return w;
}

void test_optimizer_replicas(Job& job) {
  constexpr int kRounds = 5;
  constexpr std::size_t kN = 1000;
  herd::kv::OptimizerConfig sgd;
  sgd.sgd = herd::SGDOptions{0.05, 0.9, 0, 0, false};
  sgd.rescale_grad = 0.5;
  herd::kv::OptimizerConfig adam;
  adam.kind = herd::kv::OptimizerConfig::Kind::kAdam;
  adam.adam = herd::AdamOptions{0.01, 0.9, 0.999, 1e-8, 0, false};
  for (const auto& [label, config] : {std::make_pair("sgd", sgd), std::make_pair("adam", adam)}) {
    const std::string name = std::string("optimizer ") + label;
    auto kv = herd::kv::create("dist_sync");
    std::vector<double> start(kN);
    Array w0({static_cast<int64_t>(kN)}, 0), w1 = w0;
    for (std::size_t i = 0; i < kN; ++i) {
      start[i] = 0.001 * static_cast<double>(i) - 0.3;
      w0.values[i] = static_cast<float>(start[i]);
      w1.values[i] = w0.values[i] * 2;
    }
    for (std::size_t i = 0; i < kN; ++i) start[i] = w0.values[i];
    std::vector<double> start1(kN);
    for (std::size_t i = 0; i < kN; ++i) start1[i] = w1.values[i];
    kv->init(std::vector<Key>{0, 1}, {w0.view(), w1.view()});
    kv->set_optimizer(config);
    for (int t = 0; t < kRounds; ++t) {
      Array g({static_cast<int64_t>(kN)}, 0);
      for (std::size_t i = 0; i < kN; ++i) g.values[i] = grad_of(job.rank, t, i);
      // Both keys in one push: their allreduces start together.
      kv->push(std::vector<Key>{0, 1}, {{g.view()}, {g.view()}});
    }
    Array out0({static_cast<int64_t>(kN)}, 0), out1 = out0;
    kv->pull(std::vector<Key>{0, 1}, {{out0.view()}, {out1.view()}});
    for (const auto& [out, from] :
         {std::make_pair(&out0, &start), std::make_pair(&out1, &start1)}) {
      const std::vector<double> expected =
          config.kind == herd::kv::OptimizerConfig::Kind::kSGD
              ? sgd_reference(*from, job.size, kRounds, 0.05, 0.9, 0.5)
              : adam_reference(*from, job.size, kRounds, config.adam);
      CaseCheck check(job.rec, name + " against the reference");
      for (std::size_t i = 0; i < kN; ++i) {
        if (std::abs(out->values[i] - expected[i]) > 1e-5 * std::abs(expected[i]) + 1e-6) {
          check.mismatch(static_cast<int64_t>(i), double_string(expected[i]),
                         double_string(out->values[i]));
        }
      }
    }
    expect_same_on_every_rank(job, name + " replicas bitwise equal",
                              hash_bytes(out0.values.data(), kN * sizeof(float)) ^
                                  (hash_bytes(out1.values.data(), kN * sizeof(float)) << 1));
  }
}

// MXNet's 2-bit rule for one element, in float32 as upstream computes.
float quantize_2bit(float& residual, float grad, float threshold) {
  residual += grad;
  if (residual >= threshold) {
    residual -= threshold;
    return threshold;
  }
  if (residual <= -threshold) {
    residual += threshold;
    return -threshold;
  }
  return 0;
}

void test_compression(Job& job) {
  constexpr int kN = 37;  // not a multiple of 16: a partial last word
  const float threshold = 0.5f;
  auto kv = herd::kv::create("dist_sync");
  Array zeros({kN}, 0);
  kv->init(0, zeros.view());
  kv->set_gradient_compression({"2bit", threshold});
  std::vector<std::vector<float>> residuals(job.size, std::vector<float>(kN, 0));
  for (int t = 0; t < 3; ++t) {
    Array g({kN}, 0);
    for (int i = 0; i < kN; ++i) g.values[i] = 0.2f * (job.rank + 1) - 0.1f * (i % 5) + 0.05f * t;
    kv->push(0, g.view());
    Array out({kN}, 0);
    kv->pull(0, out.view());
    CaseCheck check(job.rec, "2bit round " + std::to_string(t));
    for (int i = 0; i < kN; ++i) {
      float expected = 0;
      for (int r = 0; r < job.size; ++r) {
        const float grad = 0.2f * (r + 1) - 0.1f * (i % 5) + 0.05f * t;
        expected += quantize_2bit(residuals[r][i], grad, threshold);
      }
      if (out.values[i] != expected) {
        check.mismatch(i, double_string(expected), double_string(out.values[i]));
      }
    }
  }
  Array v({kN}, 1);
  expect_error(job, "2bit pushpull refused", error_of([&] { kv->pushpull(0, {v.view()}); }),
               {"kvstore 'dist_sync'", "pushpull", "compression"});
}

// dist_device_sync with 2-bit compression and two devices per worker: each
// device's value is quantized with its own residual and the dequantized
// values summed (the device merge), then the worker's merged value is
// quantized with the worker's residual and summed over workers.
void test_device_compression(Job& job) {
  constexpr int kN = 21;
  const float threshold = 0.5f;
  auto kv = herd::kv::create("dist_device_sync");
  Array zeros({kN}, 0);
  kv->init(0, zeros.view());
  kv->set_gradient_compression({"2bit", threshold});
  auto grad = [](int r, int d, int t, int i) {
    return 0.2f * (r + 1) - 0.1f * (i % 5) + 0.05f * t + 0.15f * d;
  };
  // Every rank's residuals, replayed here: [rank][device] and [rank].
  std::vector<std::vector<std::vector<float>>> device_residuals(
      job.size, std::vector<std::vector<float>>(2, std::vector<float>(kN, 0)));
  std::vector<std::vector<float>> worker_residuals(job.size, std::vector<float>(kN, 0));
  for (int t = 0; t < 3; ++t) {
    Array g0({kN}, 0), g1({kN}, 0);
    for (int i = 0; i < kN; ++i) {
      g0.values[i] = grad(job.rank, 0, t, i);
      g1.values[i] = grad(job.rank, 1, t, i);
    }
    kv->push(0, {g0.view(), g1.view()});
    Array out({kN}, 0);
    kv->pull(0, out.view());
    CaseCheck check(job.rec, "dist_device_sync 2bit round " + std::to_string(t));
    for (int i = 0; i < kN; ++i) {
      float expected = 0;
      for (int r = 0; r < job.size; ++r) {
        float merged = 0;
        for (int d = 0; d < 2; ++d) {
          merged += quantize_2bit(device_residuals[r][d][i], grad(r, d, t, i), threshold);
        }
        expected += quantize_2bit(worker_residuals[r][i], merged, threshold);
      }
      if (out.values[i] != expected) {
        check.mismatch(i, double_string(expected), double_string(out.values[i]));
      }
    }
  }
}

// --- horovod -------------------------------------------------------------------

void test_horovod(Job& job) {
  auto kv = herd::kv::create("horovod");
  job.rec.check(!kv->is_capable("optimizer"), "horovod capability", "claims an optimizer");
  Array value({5}, static_cast<float>(job.rank + 1));
  kv->pushpull("grad", {value.view()});
  expect_all(job, "horovod pushpull in place", value, triangle(job.size));
  Array d0({5}, static_cast<float>(job.rank + 1)), d1 = d0, out({5}, 0);
  kv->pushpull("grad", {d0.view(), d1.view()}, {out.view()});
  expect_all(job, "horovod pushpull of two values", out, 2 * triangle(job.size));
  Array mine({5}, static_cast<float>(job.rank + 3)), bout({5}, 0);
  kv->broadcast("w", mine.view(), {bout.view()});
  expect_all(job, "horovod broadcast", bout, 3);
  expect_all(job, "horovod broadcast leaves the value", mine, job.rank + 3);
  expect_error(job, "horovod push refused", error_of([&] { kv->push("grad", value.view()); }),
               {"kvstore 'horovod'", "push"});
  expect_error(job, "horovod pull refused", error_of([&] { kv->pull("grad", value.view()); }),
               {"kvstore 'horovod'", "pull"});
  expect_error(job, "horovod set_optimizer refused", error_of([&] { kv->set_optimizer({}); }),
               {"kvstore 'horovod'", "set_optimizer"});
  expect_error(job, "horovod compression refused", error_of([&] {
                 kv->set_gradient_compression({"2bit", 0.5});
               }),
               {"kvstore 'horovod'", "compression"});
}

// --- misuse --------------------------------------------------------------------

void test_misuse_on_one_rank(Job& job) {
  auto kv = herd::kv::create("dist_sync");
  Array value({3}, 1);
  kv->init(1, value.view());
  const int culprit = job.size - 1;
  if (job.rank == culprit) {
    expect_error(job, "push before init on one rank", error_of([&] { kv->push(2, value.view()); }),
                 {"kvstore 'dist_sync'", "push of key 2", "never initialised"});
    Array wrong({4}, 1);
    expect_error(job, "wrong shape on one rank", error_of([&] { kv->push(1, wrong.view()); }),
                 {"kvstore 'dist_sync'", "push of key 1", "float32 [4]", "float32 [3]"});
    expect_error(job, "double init on one rank", error_of([&] { kv->init(1, value.view()); }),
                 {"kvstore 'dist_sync'", "key 1", "already initialised"});
  }
  // Every rank goes on: the store works, nobody waits for the culprit.
  Array g({3}, static_cast<float>(job.rank + 1)), out({3}, 0);
  kv->pushpull(1, {g.view()}, {out.view()});
  expect_all(job, "pushpull after a misuse", out, triangle(job.size));

  if (job.size > 1) {
    herd::kv::OptimizerConfig config;
    config.sgd.lr = job.rank == culprit ? 0.5 : 0.25;
    const std::string error = error_of([&] { kv->set_optimizer(config); });
    expect_error(job, "optimizers that differ fail every rank", error,
                 {"kvstore 'dist_sync'", "set_optimizer", std::to_string(culprit), "sgd.lr"});
  }
  herd::kv::OptimizerConfig invalid;
  invalid.sgd.lr = job.rank == culprit ? -1 : 0.25;
  const std::string error = error_of([&] { kv->set_optimizer(invalid); });
  expect_error(job, "an invalid optimizer on one rank fails every rank", error,
               {"kvstore 'dist_sync'", job.rank == culprit ? "-1" : "invalid"});
  // Still no optimizer: a push assigns the sum.
  kv->pushpull(1, {g.view()}, {out.view()});
  expect_all(job, "pushpull after refused optimizers", out, triangle(job.size));
}

void test_save_load(Job& job) {
  auto kv = herd::kv::create("dist_sync");
  Array w({8}, 0.5f);
  kv->init(0, w.view());
  herd::kv::OptimizerConfig config;
  config.sgd = herd::SGDOptions{0.1, 0.9, 0, 0, false};
  kv->set_optimizer(config);
  Array g({8}, static_cast<float>(job.rank + 1));
  kv->push(0, g.view());
  int pid = static_cast<int>(::getpid());  // rank 0's names the file every rank reads
  MPI_Bcast(&pid, 1, MPI_INT, 0, MPI_COMM_WORLD);
  const std::string path = "/tmp/herd_test_kvstore_states_" + std::to_string(pid);
  if (job.rank == 0) kv->save_optimizer_states(path, true);
  kv->barrier();
  kv->load_optimizer_states(path);
  kv->push(0, g.view());
  Array out({8}, 0);
  kv->pull(0, out.view());
  const std::vector<double> expected = [&] {
    const double s = triangle(job.size);
    double weight = 0.5, b = s;
    weight -= 0.1 * b;
    b = 0.9 * b + s;
    weight -= 0.1 * b;
    return std::vector<double>(8, weight);
  }();
  CaseCheck check(job.rec, "save on rank 0, load everywhere, continue");
  for (int i = 0; i < 8; ++i) {
    if (std::abs(out.values[i] - expected[i]) > 1e-6) {
      check.mismatch(i, double_string(expected[i]), double_string(out.values[i]));
    }
  }
  kv->barrier();
  if (job.rank == 0) std::remove(path.c_str());
}

}  // namespace

int main() {
  if (!init_herd("test_kvstore_dist")) return 1;
  const int rank = herd::rank();
  Recorder rec("test_kvstore_dist", rank);
  Job job{rec, rank, herd::size()};
  try {
    test_pushpull_two_devices(job, "dist_sync");
    test_pushpull_two_devices(job, "dist_device_sync");
    test_test_updater(job);
    test_init_takes_rank0(job);
    test_optimizer_replicas(job);
    test_compression(job);
    test_device_compression(job);
    test_horovod(job);
    test_misuse_on_one_rank(job);
    test_save_load(job);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
