// dist_async: parameter-server ranks (HERD_NUM_SERVERS, the last ranks of
// the job) and the worker's store, run with 1 or 2 servers and 1 to 3
// workers, HERD_KVSTORE_BIGARRAY_BOUND=1000 so that a key of 2500 elements is
// split over every server.
//
// - herd::size() and kv.num_workers() count the workers, herd's
//   allreduce and process sets run among them; the layout names the
//   servers;
// - one worker: dist_async (SGD with momentum and weight decay; AdamW with a
//   cosine schedule and rescale_grad) is bitwise equal to a local store
//   running the same optimizer in this process, a small key and a split one;
// - every worker pushes to shared keys with plain SGD at lr 0.5 and integer
//   gradients (every sum exact, whatever the order): each key ends at
//   init - lr * (the sum of all pushes), and the servers' update counters
//   are N * T per key slice they hold (no update lost);
// - push then pull (and pushpull) of a worker's own key sees its push;
// - 2-bit compression: the servers apply the dequantized codes (values
//   worked out by hand from upstream's rule);
// - errors: push without an optimizer (worker side, and a hand-made request
//   the server refuses itself), set_updater, save_optimizer_states; every
//   error on the calling worker alone, the others going on;
// - with HERD_NUM_SERVERS=0, create("dist_async") refuses by name.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <mpi.h>

#include "herd/herd.h"
#include "herd/kvstore.h"
#include "herd/parameter_server.h"
#include "kvstore/ps_protocol.h"
#include "tests/mpi/mpi_test_util.h"

namespace {

using herd::TensorView;
using herd_test::Recorder;
namespace kv = herd::kv;

constexpr int kBigElements = 2500;  // above HERD_KVSTORE_BIGARRAY_BOUND=1000

TensorView view(std::vector<float>& values) {
  return TensorView{values.data(), herd::DataType::kFloat32, {static_cast<int64_t>(values.size())}};
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void check_values(Recorder& rec, const std::string& name, const std::vector<float>& actual,
                  const std::vector<float>& expected) {
  herd_test::CaseCheck check(rec, name);
  if (actual.size() != expected.size()) {
    check.fail("sizes differ");
    return;
  }
  for (std::size_t i = 0; i < actual.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      check.mismatch(static_cast<int64_t>(i), std::to_string(expected[i]),
                     std::to_string(actual[i]));
    }
  }
}

void expect_error(Recorder& rec, const std::string& name, const std::string& needle,
                  const std::function<void()>& call) {
  try {
    call();
    rec.fail(name, "did not throw");
  } catch (const herd::Error& e) {
    rec.check(std::string(e.what()).find(needle) != std::string::npos, name,
              std::string("message lacks '") + needle + "': " + e.what());
  }
}

kv::OptimizerConfig sgd(double lr, double momentum, double weight_decay) {
  kv::OptimizerConfig config;
  config.kind = kv::OptimizerConfig::Kind::kSGD;
  config.sgd.lr = lr;
  config.sgd.momentum = momentum;
  config.sgd.weight_decay = weight_decay;
  return config;
}

void test_layout(Recorder& rec) {
  const herd::ps::Layout layout = herd::ps::layout();
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  rec.check(layout.num_workers == herd::size(), "layout", "num_workers differs from herd::size");
  rec.check(layout.num_workers + layout.num_servers == world, "layout",
            "workers and servers do not add up to the job");
  rec.check(layout.bigarray_bound == 1000, "layout", "bigarray_bound is not the environment's");
  rec.check(layout.server_rank(0) == layout.num_workers, "layout", "server 0 is not rank N");
  // herd's collectives and process sets run among the workers (one
  // machine: every worker is local).
  rec.check(herd::local_size() == herd::size() && herd::local_rank() == herd::rank(), "layout",
            "local rank or size counts other ranks than the workers");
  int64_t one = 1;
  int64_t workers = 0;
  herd::allreduce("layout.count", TensorView{&one, herd::DataType::kInt64, {1}},
                  TensorView{&workers, herd::DataType::kInt64, {1}}, herd::ReduceOp::kSum);
  rec.check(workers == herd::size(), "layout", "an allreduce counted " + std::to_string(workers));
  const herd::ProcessSet first = herd::add_process_set({0});
  if (herd::rank() == 0) {
    int64_t alone = 0;
    herd::allreduce("layout.alone", TensorView{&one, herd::DataType::kInt64, {1}},
                    TensorView{&alone, herd::DataType::kInt64, {1}}, herd::ReduceOp::kSum, 1.0, 1.0,
                    first);
    rec.check(alone == 1, "layout", "a set of worker 0 alone counted " + std::to_string(alone));
  }
  herd::remove_process_set(first);
  auto store = kv::create("dist_async");
  rec.check(store->num_workers() == herd::size() && store->rank() == herd::rank(), "layout",
            "the store's rank or num_workers is not herd's");
  rec.check(store->is_capable("optimizer"), "layout", "dist_async must take an optimizer");
}

// AdamW with a cosine schedule and rescale_grad: every field of the config
// must reach the servers.
kv::OptimizerConfig adamw_cosine() {
  kv::OptimizerConfig config;
  config.kind = kv::OptimizerConfig::Kind::kAdamW;
  config.adam.lr = 0.01;
  config.adam.beta1 = 0.8;
  config.adam.weight_decay = 0.05;
  herd::CosineDecay cosine;
  cosine.base_lr = 0.02;
  cosine.total = 10;
  cosine.min_lr = 0.001;
  cosine.warmup.duration = 2;
  config.schedule = cosine;
  config.rescale_grad = 0.25;
  return config;
}

// One worker: every update runs on the servers in push order, exactly as a
// local store runs it.
void test_equals_local(Recorder& rec, const std::string& name, const kv::OptimizerConfig& config) {
  auto dist = kv::create("dist_async");
  auto local = kv::create("local");
  std::vector<float> small(37), big(kBigElements);
  for (std::size_t i = 0; i < small.size(); ++i) small[i] = 0.01f * static_cast<float>(i) - 0.2f;
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = std::sin(0.001f * static_cast<float>(i));
  for (kv::KVStore* store : {dist.get(), local.get()}) {
    store->init({kv::Key(3), kv::Key(8)}, {view(small), view(big)});
    store->set_optimizer(config);
  }
  std::vector<float> small_out(small.size()), big_out(big.size());
  std::vector<float> small_ref(small.size()), big_ref(big.size());
  for (int step = 0; step < 6; ++step) {
    std::vector<float> g_small(small.size()), g_big(big.size());
    for (std::size_t i = 0; i < g_small.size(); ++i)
      g_small[i] = std::cos(0.3f * static_cast<float>(i + step));
    for (std::size_t i = 0; i < g_big.size(); ++i)
      g_big[i] = 0.5f - std::sin(0.7f * static_cast<float>(i * (step + 1)));
    for (kv::KVStore* store : {dist.get(), local.get()}) {
      store->push({kv::Key(3), kv::Key(8)}, {{view(g_small)}, {view(g_big)}});
    }
    dist->pull({kv::Key(3), kv::Key(8)}, {{view(small_out)}, {view(big_out)}});
    local->pull({kv::Key(3), kv::Key(8)}, {{view(small_ref)}, {view(big_ref)}});
    rec.check(bitwise_equal(small_out, small_ref), name,
              "small key differs from local at step " + std::to_string(step));
    rec.check(bitwise_equal(big_out, big_ref), name,
              "split key differs from local at step " + std::to_string(step));
  }
  // pushpull: one round trip, the same update.
  std::vector<float> g(small.size(), 0.25f), g_ref(small.size(), 0.25f);
  dist->pushpull(3, {view(g)});
  local->pushpull(3, {view(g_ref)});
  rec.check(bitwise_equal(g, g_ref), name, "pushpull differs from local");
  const std::vector<int64_t> counts = dist->update_counts();
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  // 6 steps of the small key (1 slice) and the split key (1 slice per
  // server), then one pushpull.
  const int servers = herd::ps::layout().num_servers;
  rec.check(static_cast<int>(counts.size()) == servers && total == 6 * (1 + servers) + 1, name,
            "update counts sum to " + std::to_string(total));
}

// Every worker pushes integers at lr 0.5: every partial sum is exact in
// float32, so the end value does not depend on the order of arrival.
void test_commutative(Recorder& rec) {
  const int n = herd::size();
  const int rank = herd::rank();
  const int servers = herd::ps::layout().num_servers;
  constexpr int kSteps = 20;
  auto store = kv::create("dist_async");
  std::vector<float> small(64, 1.0f), big(kBigElements, -2.0f);
  store->init({kv::Key(5), kv::Key(9)}, {view(small), view(big)});
  store->set_optimizer(sgd(0.5, 0.0, 0.0));
  for (int step = 0; step < kSteps; ++step) {
    std::vector<float> g_small(small.size()), g_big(big.size());
    for (std::size_t i = 0; i < g_small.size(); ++i)
      g_small[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 3));
    for (std::size_t i = 0; i < g_big.size(); ++i)
      g_big[i] = static_cast<float>((rank + 1) * (step % 4) - static_cast<int>(i % 5));
    store->push({kv::Key(5), kv::Key(9)}, {{view(g_small)}, {view(g_big)}});
  }
  store->barrier();
  std::vector<float> small_out(small.size()), big_out(big.size());
  store->pull({kv::Key(5), kv::Key(9)}, {{view(small_out)}, {view(big_out)}});
  // Sums over workers r = 0..n-1 and steps t = 0..T-1, by closed form.
  const double rank_sum = n * (n + 1) / 2.0;  // sum of r + 1
  double step_mod_sum = 0;                    // sum of t % 4
  for (int t = 0; t < kSteps; ++t) step_mod_sum += t % 4;
  std::vector<float> small_expected(small.size()), big_expected(big.size());
  for (std::size_t i = 0; i < small.size(); ++i) {
    const double pushed = kSteps * (rank_sum + n * static_cast<double>(i % 3));
    small_expected[i] = static_cast<float>(1.0 - 0.5 * pushed);
  }
  for (std::size_t i = 0; i < big.size(); ++i) {
    const double pushed = rank_sum * step_mod_sum - kSteps * n * static_cast<double>(i % 5);
    big_expected[i] = static_cast<float>(-2.0 - 0.5 * pushed);
  }
  check_values(rec, "commutative_small", small_out, small_expected);
  check_values(rec, "commutative_split", big_out, big_expected);
  // Key 5 lives on server (5 * 9973) mod S: 0 of 1, 1 of 2 (49865 is odd);
  // the split key has a slice on every server.
  const int small_server = servers == 2 ? 1 : 0;
  const std::vector<int64_t> counts = store->update_counts();
  for (int s = 0; s < servers && s < static_cast<int>(counts.size()); ++s) {
    const int64_t expected = static_cast<int64_t>(n) * kSteps * (s == small_server ? 2 : 1);
    rec.check(counts[s] == expected, "commutative_counts",
              "server " + std::to_string(s) + " applied " + std::to_string(counts[s]) +
                  " updates, expected " + std::to_string(expected));
  }
  rec.check(static_cast<int>(counts.size()) == servers, "commutative_counts",
            "one count per server expected");
  store->barrier();  // every worker has read its counts before the store closes
}

// A worker's pull after its own push sees it, though other workers push
// other keys at the same time; a string key goes by its init order.
void test_push_then_pull(Recorder& rec) {
  const int n = herd::size();
  const int rank = herd::rank();
  auto store = kv::create("dist_async");
  std::vector<kv::Key> keys;
  std::vector<std::vector<float>> values;
  for (int r = 0; r < n; ++r) {
    keys.emplace_back(std::string("worker") + std::to_string(r));
    values.emplace_back(static_cast<std::size_t>(r == 0 ? kBigElements : 10), 100.0f);
  }
  std::vector<TensorView> views;
  for (auto& v : values) views.push_back(view(v));
  store->init(keys, views);
  store->set_optimizer(sgd(1.0, 0.0, 0.0));
  std::vector<float> ones(values[rank].size(), 1.0f);
  std::vector<float> out(values[rank].size());
  bool ordered = true;
  for (int step = 1; step <= 15; ++step) {
    store->push(keys[rank], view(ones));
    store->pull(keys[rank], view(out));
    for (float x : out) ordered = ordered && x == 100.0f - static_cast<float>(2 * step - 1);
    std::vector<float> inout(ones);
    store->pushpull(keys[rank], {view(inout)});
    for (float x : inout) ordered = ordered && x == 100.0f - static_cast<float>(2 * step);
  }
  rec.check(ordered, "push_then_pull", "a pull missed this worker's own push");
  store->barrier();
}

// worker 0's pushes go through 2-bit codes; the servers apply the
// dequantized values (lr 1): t = 0.5, g = [0.3, -0.7, 0.6, 0.1, 1.2] gives
// [0, -0.5, 0.5, 0, 0.5], then with the residual [0.5, -0.5, 0.5, 0, 0.5].
void test_compression(Recorder& rec) {
  auto store = kv::create("dist_async");
  store->set_gradient_compression({"2bit", 0.5});
  std::vector<float> small(5, 0.0f), big(kBigElements, 0.0f);
  store->init({kv::Key(11), kv::Key(12)}, {view(small), view(big)});  // sent raw
  store->set_optimizer(sgd(1.0, 0.0, 0.0));
  if (herd::rank() == 0) {
    std::vector<float> g = {0.3f, -0.7f, 0.6f, 0.1f, 1.2f};
    std::vector<float> g_big(kBigElements, 0.6f);  // codes +t, residual 0.1, then 0.2
    std::vector<float> out(5), out_big(kBigElements);
    store->push({kv::Key(11), kv::Key(12)}, {{view(g)}, {view(g_big)}});
    store->pull({kv::Key(11), kv::Key(12)}, {{view(out)}, {view(out_big)}});
    check_values(rec, "compression_first", out, {0.0f, 0.5f, -0.5f, 0.0f, -0.5f});
    check_values(rec, "compression_first_split", out_big, std::vector<float>(kBigElements, -0.5f));
    store->push({kv::Key(11), kv::Key(12)}, {{view(g)}, {view(g_big)}});
    store->pull({kv::Key(11), kv::Key(12)}, {{view(out)}, {view(out_big)}});
    check_values(rec, "compression_second", out, {-0.5f, 1.0f, -1.0f, 0.0f, -1.0f});
    check_values(rec, "compression_second_split", out_big, std::vector<float>(kBigElements, -1.0f));
  }
  store->barrier();
}

// 1-bit codes carry +1 or -1 whatever the threshold: t = 0.5, g = [0.7, -0.2]
// gives bits [1, 0], applied as [+1, -1] (lr 1).
void test_compression_1bit(Recorder& rec) {
  auto store = kv::create("dist_async");
  store->set_gradient_compression({"1bit", 0.5});
  std::vector<float> value(2, 0.0f);
  store->init(13, view(value));
  store->set_optimizer(sgd(1.0, 0.0, 0.0));
  if (herd::rank() == 0) {
    std::vector<float> g = {0.7f, -0.2f}, out(2);
    store->push(13, view(g));
    store->pull(13, view(out));
    check_values(rec, "compression_1bit", out, {-1.0f, 1.0f});
  }
  store->barrier();
}

void test_errors(Recorder& rec) {
  auto store = kv::create("dist_async");
  std::vector<float> value(4, 1.0f);
  store->init(21, view(value));
  const int last = herd::size() - 1;
  if (herd::rank() == last) {
    expect_error(rec, "no_optimizer_push",
                 "push of key 21: an optimizer is required for asynchronous updates, as upstream",
                 [&] { store->push(21, view(value)); });
    expect_error(rec, "no_optimizer_pushpull", "an optimizer is required",
                 [&] { store->pushpull(21, {view(value)}); });
    // The server's own check, for a request that bypasses the worker's.
    kv::detail::PsRequest push;
    push.op = kv::detail::PsOp::kPush;
    push.store = 0;  // this store: every worker's first dist_async store
    push.key = 21;
    push.name = "21";
    push.count = 4;
    push.payload = reinterpret_cast<const uint8_t*>(value.data());
    push.payload_bytes = 16;
    const int server = 21 * 9973 % herd::ps::layout().num_servers;
    const kv::detail::PsReply reply = kv::detail::decode_reply(herd::ps::wait_reply(
        herd::ps::send_request(server, kv::detail::encode_request(push)), "test push"));
    rec.check(!reply.ok && reply.error.find("an optimizer is required for asynchronous "
                                            "updates") != std::string::npos,
              "no_optimizer_server", "the server took a push without optimizer: " + reply.error);
  }
  expect_error(rec, "set_updater", "use set_optimizer",
               [&] { store->set_updater([](const kv::Key&, const TensorView&, TensorView) {}); });
  expect_error(rec, "save_states", "lives on the parameter servers",
               [&] { store->save_optimizer_states("/nonexistent/states"); });
  // The others went on; the value is untouched.
  store->barrier();
  std::vector<float> out(4);
  store->pull(21, view(out));
  check_values(rec, "untouched_after_errors", out, value);
}

}  // namespace

int main() {
  if (!herd_test::init_herd("test_kvstore_async")) return 1;
  Recorder rec("test_kvstore_async", herd::rank());
  try {
    if (herd::ps::layout().num_servers == 0) {
      expect_error(rec, "no_servers", "kvstore 'dist_async': the job has no parameter servers",
                   [] { kv::create("dist_async"); });
      herd_test::shutdown_herd(rec);
      return rec.finish();
    }
    test_errors(rec);  // first: its store is number 0
    test_layout(rec);
    if (herd::size() == 1) {
      test_equals_local(rec, "equals_local_sgd", sgd(0.1, 0.9, 1e-3));
      test_equals_local(rec, "equals_local_adamw", adamw_cosine());
    }
    test_commutative(rec);
    test_push_then_pull(rec);
    test_compression(rec);
    test_compression_1bit(rec);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  // MPI_COMM_WORLD holds the servers too, which take no part in a verdict
  // over it: each worker judges itself once herd (and MPI) have shut down,
  // and mpiexec fails if any worker does.
  if (!herd_test::shutdown_herd(rec)) return 1;
  return rec.finish();
}
