// ResponseCache: lookups, LRU eviction, deterministic slot reuse, and that
// two caches fed the same operations agree on every slot.
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/response_cache.h"

namespace herd::detail {
namespace {

Response response(const std::string& name, std::vector<int64_t> shape = {8}) {
  Response r;
  r.name = name;
  r.shape = std::move(shape);
  return r;
}

Request request_for(const Response& r) {
  Request q;
  q.name = r.name;
  q.dtype = r.dtype;
  q.op = r.op;
  q.prescale = r.prescale;
  q.postscale = r.postscale;
  q.device = r.device;
  q.shape = r.shape;
  return q;
}

uint32_t put_slot(ResponseCache& cache, const Response& r) {
  auto result = cache.put(r);
  REQUIRE(result.has_value());
  return result->slot;
}

}  // namespace

TEST_CASE("ResponseCache: hit, miss and mismatch", "[cache]") {
  ResponseCache cache(4);
  Response w = response("w", {4, 3});
  CHECK(cache.lookup(request_for(w)).state == ResponseCache::LookupState::kMiss);
  CHECK(put_slot(cache, w) == 0);
  CHECK(cache.size() == 1);

  ResponseCache::Lookup hit = cache.lookup(request_for(w));
  CHECK(hit.state == ResponseCache::LookupState::kHit);
  CHECK(hit.slot == 0);

  Request reshaped = request_for(w);
  reshaped.shape = {12};
  ResponseCache::Lookup mismatch = cache.lookup(reshaped);
  CHECK(mismatch.state == ResponseCache::LookupState::kMismatch);
  CHECK(mismatch.slot == 0);

  Request other_op = request_for(w);
  other_op.op = ReduceOp::kMax;
  CHECK(cache.lookup(other_op).state == ResponseCache::LookupState::kMismatch);

  Request other_name = request_for(w);
  other_name.name = "v";
  CHECK(cache.lookup(other_name).state == ResponseCache::LookupState::kMiss);

  CHECK(cache.occupied(0));
  CHECK_FALSE(cache.occupied(1));
  CHECK_FALSE(cache.occupied(4));  // past capacity
  CHECK(cache.response(0).shape == std::vector<int64_t>{4, 3});
  CHECK(cache.slot_of("w") == 0u);
  CHECK_FALSE(cache.slot_of("v").has_value());
}

TEST_CASE("ResponseCache: put of a cached name replaces it in place", "[cache]") {
  ResponseCache cache(2);
  CHECK(put_slot(cache, response("a")) == 0);
  CHECK(put_slot(cache, response("b")) == 1);
  auto replaced = cache.put(response("a", {16}));
  REQUIRE(replaced.has_value());
  CHECK(replaced->slot == 0);
  CHECK_FALSE(replaced->evicted.has_value());
  CHECK(cache.size() == 2);
  CHECK(cache.response(0).shape == std::vector<int64_t>{16});
  // The replacement counts as a use: "b" is now the least recently used.
  auto result = cache.put(response("c"));
  REQUIRE(result.has_value());
  CHECK(result->slot == 1);
  CHECK(result->evicted == std::string("b"));
}

TEST_CASE("ResponseCache: evicts the least recently used", "[cache]") {
  ResponseCache cache(3);
  for (const char* name : {"a", "b", "c"}) put_slot(cache, response(name));
  std::vector<std::string> evicted;
  std::vector<uint32_t> slots;
  for (const char* name : {"d", "e", "f", "g"}) {
    auto result = cache.put(response(name));
    REQUIRE(result.has_value());
    REQUIRE(result->evicted.has_value());
    evicted.push_back(*result->evicted);
    slots.push_back(result->slot);
  }
  // Oldest first; each newcomer takes the evicted name's slot.
  CHECK(evicted == std::vector<std::string>{"a", "b", "c", "d"});
  CHECK(slots == std::vector<uint32_t>{0, 1, 2, 0});
  CHECK(cache.size() == 3);
  CHECK_FALSE(cache.slot_of("a").has_value());
  CHECK(cache.slot_of("g") == 0u);
}

TEST_CASE("ResponseCache: touch changes the victim", "[cache]") {
  ResponseCache cache(3);
  for (const char* name : {"a", "b", "c"}) put_slot(cache, response(name));
  cache.touch(0);  // "a" is now the most recently used
  auto result = cache.put(response("d"));
  REQUIRE(result.has_value());
  CHECK(result->evicted == std::string("b"));
  CHECK(result->slot == 1);
  cache.touch(2);
  cache.touch(0);
  result = cache.put(response("e"));
  REQUIRE(result.has_value());
  CHECK(result->evicted == std::string("d"));
}

TEST_CASE("ResponseCache: erase frees the slot, and the lowest free slot is reused", "[cache]") {
  ResponseCache cache(4);
  for (const char* name : {"a", "b", "c", "d"}) put_slot(cache, response(name));
  cache.erase(2);
  cache.erase(1);
  CHECK(cache.size() == 2);
  CHECK_FALSE(cache.occupied(1));
  CHECK_FALSE(cache.slot_of("b").has_value());
  Request b = request_for(response("b"));
  CHECK(cache.lookup(b).state == ResponseCache::LookupState::kMiss);

  auto result = cache.put(response("x"));
  REQUIRE(result.has_value());
  CHECK(result->slot == 1);  // lowest free, not the last freed
  CHECK_FALSE(result->evicted.has_value());
  CHECK(put_slot(cache, response("y")) == 2);
  // Full again: the next put evicts "a", the least recently used.
  result = cache.put(response("z"));
  REQUIRE(result.has_value());
  CHECK(result->evicted == std::string("a"));
  CHECK(result->slot == 0);
}

TEST_CASE("ResponseCache: slot_bound follows the highest slot ever used", "[cache]") {
  ResponseCache cache(4);
  CHECK(cache.slot_bound() == 0);
  put_slot(cache, response("a"));
  CHECK(cache.slot_bound() == 1);
  put_slot(cache, response("b"));
  put_slot(cache, response("c"));
  CHECK(cache.slot_bound() == 3);
  put_slot(cache, response("b", {9}));  // replaced in place: no new slot
  CHECK(cache.slot_bound() == 3);
  cache.erase(2);
  cache.erase(1);
  CHECK(cache.slot_bound() == 3);  // never shrinks
  CHECK(put_slot(cache, response("x")) == 1);
  CHECK(cache.slot_bound() == 3);
  put_slot(cache, response("y"));
  put_slot(cache, response("z"));
  CHECK(cache.slot_bound() == 4);
  put_slot(cache, response("w"));  // evicts: the bound stays at the capacity
  CHECK(cache.slot_bound() == 4);
}

TEST_CASE("ResponseCache: two caches fed the same operations agree on every slot", "[cache]") {
  const std::size_t capacity = 16;
  ResponseCache first(capacity);
  ResponseCache second(capacity);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> pick_name(0, 40);
  std::uniform_int_distribution<int> pick_action(0, 9);
  for (int step = 0; step < 5000; ++step) {
    const int action = pick_action(rng);
    if (action < 6) {
      Response r = response("t" + std::to_string(pick_name(rng)), {pick_name(rng)});
      auto a = first.put(r);
      auto b = second.put(r);
      REQUIRE(a.has_value());
      REQUIRE(b.has_value());
      REQUIRE(a->slot == b->slot);
      REQUIRE(a->evicted == b->evicted);
    } else {
      const auto slot = static_cast<uint32_t>(pick_name(rng) % capacity);
      REQUIRE(first.occupied(slot) == second.occupied(slot));
      if (!first.occupied(slot)) continue;
      if (action < 9) {
        first.touch(slot);
        second.touch(slot);
      } else {
        first.erase(slot);
        second.erase(slot);
      }
    }
  }
  REQUIRE(first.size() == second.size());
  REQUIRE(first.slot_bound() == second.slot_bound());
  for (uint32_t slot = 0; slot < capacity; ++slot) {
    if (slot >= first.slot_bound()) REQUIRE_FALSE(first.occupied(slot));
    INFO("slot " << slot);
    REQUIRE(first.occupied(slot) == second.occupied(slot));
    if (first.occupied(slot)) CHECK(first.response(slot).name == second.response(slot).name);
  }
}

TEST_CASE("ResponseCache: capacity 0 disables the cache", "[cache]") {
  ResponseCache cache(0);
  CHECK(cache.capacity() == 0);
  CHECK_FALSE(cache.put(response("a")).has_value());
  CHECK(cache.size() == 0);
  CHECK(cache.lookup(request_for(response("a"))).state == ResponseCache::LookupState::kMiss);
  CHECK_FALSE(cache.occupied(0));
  CHECK_FALSE(cache.slot_of("a").has_value());
}

TEST_CASE("ResponseCache: capacity 1 always reuses slot 0", "[cache]") {
  ResponseCache cache(1);
  CHECK(put_slot(cache, response("a")) == 0);
  auto result = cache.put(response("b"));
  REQUIRE(result.has_value());
  CHECK(result->slot == 0);
  CHECK(result->evicted == std::string("a"));
}

}  // namespace herd::detail
