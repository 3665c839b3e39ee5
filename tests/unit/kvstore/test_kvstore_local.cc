// The local and device KVStores through the public API: MXNet's canonical
// single-process vectors (its KVStore tutorial, shape (2,3)), assignment
// without an updater, string keys, pushpull, create()'s type rules, and
// every misuse refused with a message naming the key, the values and the
// store's type.
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/kvstore.h"
#include "tests/unit/kvstore/kvstore_test_util.h"

namespace herd {
namespace kv {
namespace {

using test::Array;
using test::check_all;
using test::check_throws_with;
using test::shape23;

// stored += 2 * merged: the tutorial's updater.
void add_twice(const Key& /*key*/, const TensorView& merged, TensorView stored) {
  const auto* in = static_cast<const float*>(merged.data);
  auto* out = static_cast<float*>(stored.data);
  for (int64_t i = 0; i < stored.num_elements(); ++i) out[i] += 2 * in[i];
}

TEST_CASE("local: MXNet's canonical vectors", "[kvstore]") {
  for (const char* type : {"local", "device"}) {
    INFO("type " << type);
    auto kv = create(type);
    REQUIRE(kv->type() == type);
    REQUIRE(kv->rank() == 0);
    REQUIRE(kv->num_workers() == 1);

    Array twos(shape23(), 2), out(shape23(), 0);
    kv->init(3, twos.view());
    kv->pull(3, out.view());
    check_all(out, 2, "init 3 <- 2s, pull");

    Array eights(shape23(), 8);
    kv->push(3, eights.view());
    kv->pull(3, out.view());
    check_all(out, 8, "push 8s (assign)");

    std::vector<Array> devices(4, Array(shape23(), 1));
    std::vector<TensorView> views;
    for (Array& d : devices) views.push_back(d.view());
    kv->push(3, views);
    kv->pull(3, out.view());
    check_all(out, 4, "push four arrays of ones");

    kv->set_updater(add_twice);
    Array ones(shape23(), 1);
    kv->push(3, ones.view());
    kv->pull(3, out.view());
    check_all(out, 6, "updater stored += 2 * input, push ones");

    const std::vector<Key> keys = {5, 7, 9};
    std::vector<Array> inits(3, Array(shape23(), 1));
    kv->init(keys, {inits[0].view(), inits[1].view(), inits[2].view()});
    std::vector<std::vector<TensorView>> pushes(3, {ones.view()});
    kv->push(keys, pushes);
    std::vector<Array> outs(3, Array(shape23(), 0));
    kv->pull(keys, {{outs[0].view()}, {outs[1].view()}, {outs[2].view()}});
    for (const Array& o : outs) check_all(o, 3, "keys 5,7,9: init ones, push ones");

    std::vector<std::vector<TensorView>> four_devices(3, views);
    kv->push(keys, four_devices);
    kv->pull(keys, {{outs[0].view()}, {outs[1].view()}, {outs[2].view()}});
    for (const Array& o : outs) check_all(o, 11, "push 4 devices of ones");
  }
}

TEST_CASE("local: without an updater a push replaces the value", "[kvstore]") {
  auto kv = create("local");
  Array start(shape23(), 5), first(shape23(), -1), second(shape23(), 0.25f), out(shape23(), 0);
  kv->init("w", start.view());
  kv->push("w", first.view());
  kv->push("w", second.view());
  kv->pull("w", out.view());
  check_all(out, 0.25f, "the last push");
  REQUIRE(kv->update_counts() == std::vector<int64_t>{2});
}

TEST_CASE("local: a push's values are summed in list order", "[kvstore]") {
  // 2^24 + 1 + 1 in float32: adding in list order gives 2^24 (each +1 is
  // rounded away); (1 + 1) + 2^24 would give 2^24 + 2.
  auto kv = create("local");
  const float big = 16777216.0f;
  Array init({1}, 0), a({1}, big), b({1}, 1), c({1}, 1), out({1}, 0);
  kv->init(0, init.view());
  kv->push(0, {a.view(), b.view(), c.view()});
  kv->pull(0, out.view());
  REQUIRE(out.values[0] == big);
  kv->push(0, {b.view(), c.view(), a.view()});
  kv->pull(0, out.view());
  REQUIRE(out.values[0] == big + 2);

  // Integers sum exactly, wrapping as the type does.
  std::vector<int32_t> i0 = {1, 2147483647}, i1 = {2, 1}, iout = {0, 0};
  const TensorView v0{i0.data(), DataType::kInt32, {2}};
  const TensorView v1{i1.data(), DataType::kInt32, {2}};
  kv->init(1, v0);
  kv->push(1, {v0, v1});
  kv->pull(1, TensorView{iout.data(), DataType::kInt32, {2}});
  REQUIRE(iout[0] == 3);
  REQUIRE(iout[1] == INT32_MIN);
}

TEST_CASE("local: string keys, several outputs, the updater sees the key", "[kvstore]") {
  auto kv = create("local");
  Array a(shape23(), 1), b(shape23(), 2);
  kv->init(std::vector<Key>{"fc1.weight", "fc1.bias"}, {a.view(), b.view()});
  std::vector<std::string> seen;
  kv->set_updater([&seen](const Key& key, const TensorView& merged, TensorView stored) {
    seen.push_back(key.str_key());
    add_twice(key, merged, stored);
  });
  Array ones(shape23(), 1);
  kv->push(std::vector<Key>{"fc1.bias", "fc1.weight"}, {{ones.view()}, {ones.view()}});
  REQUIRE(seen == std::vector<std::string>{"fc1.bias", "fc1.weight"});
  Array out1(shape23(), 0), out2(shape23(), 0);
  kv->pull("fc1.bias", {out1.view(), out2.view()});
  check_all(out1, 4, "first output");
  check_all(out2, 4, "second output");
}

TEST_CASE("local: pushpull in place and into outputs; broadcast", "[kvstore]") {
  auto kv = create("local");
  Array init(shape23(), 0);
  kv->init(3, init.view());
  Array value(shape23(), 3);
  kv->pushpull(3, {value.view()});
  check_all(value, 3, "in place");

  Array d0(shape23(), 1), d1(shape23(), 2), out(shape23(), 0);
  kv->pushpull(3, {d0.view(), d1.view()}, {out.view()});
  check_all(out, 3, "sum of two values into the output");
  check_all(d0, 1, "the first value unchanged");
  check_all(d1, 2, "the second value unchanged");

  kv->pushpull(3, {d0.view(), d1.view()});
  check_all(d0, 3, "no outputs: the result into every value");
  check_all(d1, 3, "no outputs: the result into every value");

  Array b(shape23(), 7), bout(shape23(), 0);
  kv->broadcast(4, b.view(), {bout.view()});
  check_all(bout, 7, "broadcast = init + pull");
  check_throws_with([&] { kv->broadcast(4, b.view(), {bout.view()}); },
                    {"kvstore 'local'", "key 4", "already initialised"});
}

TEST_CASE("create: MXNet's type rules, and the unknown types refused", "[kvstore]") {
  REQUIRE(create("Local")->type() == "local");
  REQUIRE(create("DEVICE")->type() == "device");
  REQUIRE(create("local_allreduce_cpu")->type() == "local_allreduce_cpu");
  REQUIRE(create()->type() == "local");
  check_throws_with([] { create("nccl"); }, {"unknown type 'nccl'",
                                             "local, device, dist_sync, dist_device_sync, "
                                             "dist_async, horovod"});
  check_throws_with([] { create("redis"); }, {"unknown type 'redis'"});
  // Distributed types need herd's runtime, which these tests do not start.
  for (const char* type : {"dist_sync", "Dist_Device_Sync", "dist", "horovod"}) {
    INFO("type " << type);
    check_throws_with([type] { create(type); }, {"herd::init() first"});
  }
  REQUIRE_FALSE(create("local")->is_capable("something"));
  REQUIRE(create("local")->is_capable("optimizer"));
}

TEST_CASE("local: misuse is refused, naming the key, the values and the type", "[kvstore]") {
  auto kv = create("local");
  Array value(shape23(), 1), out(shape23(), 0);
  check_throws_with([&] { kv->push(3, value.view()); },
                    {"kvstore 'local'", "push of key 3", "never initialised"});
  check_throws_with([&] { kv->pull("w", out.view()); },
                    {"kvstore 'local'", "pull of key \"w\"", "never initialised"});
  kv->init(3, value.view());
  check_throws_with([&] { kv->init(3, value.view()); },
                    {"kvstore 'local'", "key 3", "already initialised"});
  check_throws_with([&] { kv->init("w", value.view()); },
                    {"kvstore 'local'", "Mixed key types are not allowed", "\"w\""});
  check_throws_with(
      [&] {
        kv->init(std::vector<Key>{4, 4}, {value.view(), value.view()});
      },
      {"kvstore 'local'", "key 4", "twice"});

  Array wrong_shape({3, 2}, 1);
  check_throws_with([&] { kv->push(3, wrong_shape.view()); },
                    {"kvstore 'local'", "push of key 3", "float32 [3,2]", "float32 [2,3]"});
  check_throws_with([&] { kv->pull(3, wrong_shape.view()); },
                    {"kvstore 'local'", "pull of key 3", "float32 [3,2]", "float32 [2,3]"});
  std::vector<double> doubles(6, 1.0);
  const TensorView double_view{doubles.data(), DataType::kFloat64, {2, 3}};
  check_throws_with(
      [&] {
        kv->push(3, {value.view(), double_view});
      },
      {"kvstore 'local'", "value 1 of 2", "float64 [2,3]", "float32 [2,3]"});
  check_throws_with([&] { kv->push(3, std::vector<TensorView>{}); },
                    {"kvstore 'local'", "push of key 3", "no value"});
  check_throws_with([&] { kv->push(std::vector<Key>{3}, {}); },
                    {"kvstore 'local'", "1 keys but 0 value lists"});
  TensorView on_gpu = value.view();
  on_gpu.device = Device::gpu(0);
  check_throws_with([&] { kv->push(3, on_gpu); },
                    {"kvstore 'local'", "push of key 3", "gpu:0", "host memory"});

  check_throws_with(
      [&] {
        kv->set_gradient_compression({"2bit", 0.5});
      },
      {"kvstore 'local'", "gradient compression", "device or dist"});
  // A failed call changes nothing: the key still holds its value.
  kv->pull(3, out.view());
  check_all(out, 1, "value after the refused calls");
}

TEST_CASE("device: 2-bit compression of several values, each with its own residual", "[kvstore]") {
  // MXNet's vector: threshold 0.5, g = [0.3, -0.7, 0.6, 0.1, 1.2] dequantizes
  // to [0, -0.5, 0.5, 0, 0.5] on the first push and [0.5, -0.5, 0.5, 0, 0.5]
  // on the second (the residuals carry over); two devices push g each.
  auto kv = create("device");
  Array init({5}, 0), out({5}, 0);
  kv->init(0, init.view());
  kv->set_gradient_compression({"2bit", 0.5});
  std::vector<float> g = {0.3f, -0.7f, 0.6f, 0.1f, 1.2f};
  std::vector<float> g0 = g, g1 = g;
  const TensorView v0{g0.data(), DataType::kFloat32, {5}};
  const TensorView v1{g1.data(), DataType::kFloat32, {5}};
  kv->push(0, {v0, v1});
  kv->pull(0, out.view());
  REQUIRE(out.values == std::vector<float>{0, -1, 1, 0, 1});
  kv->push(0, {v0, v1});
  kv->pull(0, out.view());
  REQUIRE(out.values == std::vector<float>{1, -1, 1, 0, 1});
  REQUIRE(g0 == g);  // the pushed values are not modified

  check_throws_with(
      [&] {
        kv->pushpull(0, {v0, v1});
      },
      {"kvstore 'device'", "pushpull", "gradient compression"});
  std::vector<double> doubles(5, 1.0);
  const TensorView double_view{doubles.data(), DataType::kFloat64, {5}};
  kv->init(1, double_view);
  check_throws_with(
      [&] {
        kv->push(1, {double_view, double_view});
      },
      {"kvstore 'device'", "key 1", "float32", "float64"});
  check_throws_with(
      [&] {
        kv->set_gradient_compression({"3bit", 0.5});
      },
      {"kvstore 'device'", "3bit"});
}

}  // namespace
}  // namespace kv
}  // namespace herd
