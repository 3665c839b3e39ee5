// thread_scratch<Tag>(bytes): memory of this thread, at least `bytes` long,
// kept from one call to the next and never initialized. Buffers allocated
// per call were handed back to the kernel on free, so each call filled fresh
// pages and paid a page fault per 4 KiB (docs/design/ring-allreduce.md).
// Each Tag names a buffer of its own, so one caller may hold a tag's memory
// while a function it calls uses another's; a thread runs one collective at
// a time, so one buffer per tag and thread suffices.
#pragma once

#include <cstddef>
#include <memory>

namespace herd::collectives::detail {

template <typename Tag>
unsigned char* thread_scratch(std::size_t bytes) {
  thread_local std::unique_ptr<unsigned char[]> storage;
  thread_local std::size_t capacity = 0;
  if (bytes > capacity) {
    storage.reset(new unsigned char[bytes]);
    capacity = bytes;
  }
  return storage.get();
}

}  // namespace herd::collectives::detail
