// ResponseCache: the names (and their agreed signature) that have been
// negotiated before, each in a numbered slot.
//
// Once a name is cached, ranks agree on it by setting its slot's bit in one
// small bitwise-AND allreduce (see cycle_bits.h) instead of sending the name
// to rank 0. Every rank holds its own cache and must apply the same
// operations in the same order (put for each negotiated response, touch for
// each cached response executed, erase for each invalidated slot), so that
// slot numbers mean the same name everywhere. Eviction is least recently used.
// Used only by the background thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/message.h"

namespace herd::detail {

class ResponseCache {
 public:
  // capacity 0 disables the cache: lookups miss and puts store nothing.
  explicit ResponseCache(std::size_t capacity);

  std::size_t capacity() const { return capacity_; }
  std::size_t size() const { return by_name_.size(); }
  // One more than the highest slot ever occupied (0 for a cache never put
  // to): every occupied slot is below it. It never shrinks, and like the slot
  // numbers it is a function of the operation sequence alone, so caches fed
  // the same operations agree on it. The per-cycle agreement carries bits for
  // these slots only (a small model's vector stays a few words, which MPI
  // sends measurably faster than the whole capacity's).
  std::size_t slot_bound() const { return slot_bound_; }

  enum class LookupState {
    kMiss,      // name not cached
    kHit,       // cached with the same signature as the request
    kMismatch,  // cached, but the request's signature differs: invalidate
  };
  struct Lookup {
    LookupState state = LookupState::kMiss;
    uint32_t slot = 0;  // valid for kHit and kMismatch
  };
  Lookup lookup(const Request& request) const;

  struct PutResult {
    uint32_t slot = 0;
    std::optional<std::string> evicted;  // the name that lost its slot, if any
  };
  // Caches an execute response (not an error), replacing an entry with the
  // same name. When full, evicts the least recently used entry. Returns
  // nothing when the cache is disabled.
  std::optional<PutResult> put(const Response& response);

  // Marks the slot most recently used.
  void touch(uint32_t slot);
  void erase(uint32_t slot);

  bool occupied(uint32_t slot) const;
  // The cached response in an occupied slot.
  const Response& response(uint32_t slot) const;
  std::optional<uint32_t> slot_of(const std::string& name) const;

 private:
  struct Slot {
    bool occupied = false;
    Response response;
    std::list<uint32_t>::iterator lru_position;
  };

  std::size_t capacity_;
  std::size_t slot_bound_ = 0;
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_slots_;
  std::list<uint32_t> lru_;  // front = most recently used
  std::unordered_map<std::string, uint32_t> by_name_;
};

}  // namespace herd::detail
