// The response cache's slot bookkeeping. Background thread only.
//
// Slot numbers must come out the same on every rank, because ranks name
// cached tensors to each other by slot. So every choice here is a function of
// the operation sequence alone: a new name takes the lowest free slot (a
// min-heap of free slots), and when none is free it takes the slot of the
// least recently used entry (the back of lru_). Nothing depends on hashing or
// addresses.
#include "src/response_cache.h"

#include <algorithm>
#include <functional>
#include <limits>

#include "common/enforce.h"

namespace herd::detail {

ResponseCache::ResponseCache(std::size_t capacity) : capacity_(capacity), slots_(capacity) {
  HERD_ENFORCE_LE(capacity, std::size_t{std::numeric_limits<uint32_t>::max()});
  free_slots_.reserve(capacity);
  for (std::size_t slot = 0; slot < capacity; ++slot) {
    free_slots_.push_back(static_cast<uint32_t>(slot));
  }
  // Ascending order already satisfies the min-heap property.
}

ResponseCache::Lookup ResponseCache::lookup(const Request& request) const {
  auto it = by_name_.find(request.name);
  if (it == by_name_.end()) return {};
  const uint32_t slot = it->second;
  const LookupState state =
      slots_[slot].response.matches(request) ? LookupState::kHit : LookupState::kMismatch;
  return {state, slot};
}

std::optional<ResponseCache::PutResult> ResponseCache::put(const Response& response) {
  HERD_ENFORCE(response.type != ResponseType::kError);
  if (capacity_ == 0) return std::nullopt;

  PutResult result;
  auto existing = by_name_.find(response.name);
  if (existing != by_name_.end()) {
    // Same name, maybe a new signature: keep the slot so other ranks, which
    // replace the same entry, still agree on it.
    result.slot = existing->second;
    slots_[result.slot].response = response;
    touch(result.slot);
    return result;
  }

  if (!free_slots_.empty()) {
    std::pop_heap(free_slots_.begin(), free_slots_.end(), std::greater<>());
    result.slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    result.slot = lru_.back();
    Slot& victim = slots_[result.slot];
    result.evicted = victim.response.name;
    by_name_.erase(victim.response.name);
    lru_.erase(victim.lru_position);
    victim.occupied = false;
  }

  slot_bound_ = std::max(slot_bound_, std::size_t{result.slot} + 1);
  Slot& slot = slots_[result.slot];
  slot.occupied = true;
  slot.response = response;
  lru_.push_front(result.slot);
  slot.lru_position = lru_.begin();
  by_name_.emplace(response.name, result.slot);
  return result;
}

void ResponseCache::touch(uint32_t slot) {
  HERD_ENFORCE(occupied(slot));
  lru_.splice(lru_.begin(), lru_, slots_[slot].lru_position);
}

void ResponseCache::erase(uint32_t slot) {
  // Every rank erases the same slots (they come out of the agreement), so an
  // unoccupied one means the caches have diverged: a bug, not bad input.
  HERD_ENFORCE(occupied(slot));
  Slot& entry = slots_[slot];
  by_name_.erase(entry.response.name);
  lru_.erase(entry.lru_position);
  entry.occupied = false;
  entry.response = Response();
  free_slots_.push_back(slot);
  std::push_heap(free_slots_.begin(), free_slots_.end(), std::greater<>());
}

bool ResponseCache::occupied(uint32_t slot) const {
  return slot < capacity_ && slots_[slot].occupied;
}

const Response& ResponseCache::response(uint32_t slot) const {
  HERD_ENFORCE(occupied(slot));
  return slots_[slot].response;
}

std::optional<uint32_t> ResponseCache::slot_of(const std::string& name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

}  // namespace herd::detail
