// Host memory for results the Python layer allocates itself (herd.torch's
// out-of-place allreduce), recycled once Python drops them.
//
// Why: a new result is new memory. glibc serves a large allocation with mmap
// and gives it back with munmap, so a fresh 16 MiB result page-faults 4096
// times, the kernel zeroing each page, and it does so inside the collective,
// on the background thread, where every rank waits for the slowest. A block
// whose Python owner died goes back to this pool instead, and the next result
// of the same size takes it with its pages already mapped. Python reads a
// HostBuffer through the buffer protocol (torch.frombuffer), and the tensor
// made from it holds a reference to it for as long as its memory is in use,
// so a block is recycled only once no tensor, view or array uses it.
#include <pybind11/pybind11.h>

#include <cstdlib>
#include <list>
#include <mutex>
#include <new>
#include <unordered_map>
#include <utility>
#include <vector>

#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {
namespace {

// Blocks start on a cache line, as torch's own CPU allocations do.
constexpr std::size_t kBlockAlignment = 64;

std::size_t rounded_up(std::size_t bytes) {
  return (bytes + kBlockAlignment - 1) / kBlockAlignment * kBlockAlignment;
}

// Idle blocks by exact size. A take gets the block of that size returned
// last (its lines the likeliest to be in cache); the blocks returned first
// go once the idle bytes would pass the bound. Any thread.
class HostBlockPool {
 public:
  explicit HostBlockPool(std::size_t max_idle_bytes) : max_idle_bytes_(max_idle_bytes) {}

  // A block of `bytes` (> 0): an idle one of that size, else a new one.
  // Throws std::bad_alloc when none can be allocated.
  void* take(std::size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto found = by_size_.find(bytes);
      if (found != by_size_.end()) {
        const auto newest = found->second.back();
        found->second.pop_back();
        if (found->second.empty()) by_size_.erase(found);
        void* block = newest->block;
        idle_.erase(newest);
        idle_bytes_ -= bytes;
        return block;
      }
    }
    void* block = std::aligned_alloc(kBlockAlignment, rounded_up(bytes));
    if (block == nullptr) throw std::bad_alloc();
    return block;
  }

  // Keeps `block` for the next take of `bytes`, freeing the oldest idle
  // blocks to stay within the bound (and this one if it alone exceeds it).
  void give_back(void* block, std::size_t bytes) {
    std::list<Idle> freed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (bytes > max_idle_bytes_) {
        freed.push_back({block, bytes});
      } else {
        while (idle_bytes_ + bytes > max_idle_bytes_) evict_oldest(freed);
        idle_.push_back({block, bytes});
        by_size_[bytes].push_back(std::prev(idle_.end()));
        idle_bytes_ += bytes;
      }
    }
    for (const Idle& idle : freed) std::free(idle.block);
  }

  // Frees every idle block.
  void release() {
    std::list<Idle> freed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      while (!idle_.empty()) evict_oldest(freed);
    }
    for (const Idle& idle : freed) std::free(idle.block);
  }

  std::size_t idle_bytes() {
    std::lock_guard<std::mutex> lock(mutex_);
    return idle_bytes_;
  }

  std::size_t max_idle_bytes() const { return max_idle_bytes_; }

 private:
  struct Idle {
    void* block;
    std::size_t bytes;
  };
  using IdleList = std::list<Idle>;

  // Moves the oldest idle block into `freed`; the mutex is held. It is also
  // the oldest of its size, so the first of its size's list.
  void evict_oldest(IdleList& freed) {
    const auto oldest = idle_.begin();
    const auto same_size = by_size_.find(oldest->bytes);
    same_size->second.erase(same_size->second.begin());
    if (same_size->second.empty()) by_size_.erase(same_size);
    idle_bytes_ -= oldest->bytes;
    freed.splice(freed.end(), idle_, oldest);
  }

  const std::size_t max_idle_bytes_;
  std::mutex mutex_;
  IdleList idle_;  // in the order they were returned, oldest first
  std::unordered_map<std::size_t, std::vector<IdleList::iterator>> by_size_;  // oldest first
  std::size_t idle_bytes_ = 0;
};

// At most this much idle memory per process: a few large results' worth.
constexpr std::size_t kMaxIdleBytes = std::size_t{256} << 20;

HostBlockPool& host_block_pool() {
  static auto* pool = new HostBlockPool(kMaxIdleBytes);  // never destroyed: outlives every buffer
  return *pool;
}

// One block, owned until Python drops the last reference, then returned.
class HostBuffer {
 public:
  explicit HostBuffer(std::size_t bytes)
      : bytes_(bytes), data_(bytes == 0 ? nullptr : host_block_pool().take(bytes)) {}
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  ~HostBuffer() {
    if (data_ != nullptr) host_block_pool().give_back(data_, bytes_);
  }

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  std::size_t bytes_;
  void* data_;
};

// The buffer protocol's entry for HostBuffer: its bytes, writable, one
// dimension. CPython calls it with the GIL held; nothing may be thrown.
int get_host_buffer(PyObject* object, Py_buffer* view, int flags) {
  if (view == nullptr) {
    PyErr_SetString(PyExc_BufferError, "herd.HostBuffer: no view to fill");
    return -1;
  }
  view->obj = nullptr;
  const HostBuffer* buffer = nullptr;
  try {
    buffer = py::handle(object).cast<const HostBuffer*>();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_BufferError, error.what());
    return -1;
  }
  if (buffer == nullptr) {
    PyErr_SetString(PyExc_BufferError, "herd.HostBuffer: no buffer to take a view of");
    return -1;
  }
  return PyBuffer_FillInfo(view, object, buffer->data(), static_cast<Py_ssize_t>(buffer->bytes()),
                           /*readonly=*/0, flags);
}

}  // namespace

void bind_host_buffers(py::module_& m) {
  py::class_<HostBuffer> buffer_class(
      m, "HostBuffer", py::buffer_protocol(),
      "Host memory for a result, from herd's pool of recycled blocks; read it with the buffer "
      "protocol (torch.frombuffer). Its block goes back to the pool once nothing uses it.");
  auto* heap_type = reinterpret_cast<PyHeapTypeObject*>(buffer_class.ptr());
  heap_type->as_buffer.bf_getbuffer = &get_host_buffer;
  heap_type->as_buffer.bf_releasebuffer = nullptr;  // PyBuffer_FillInfo allocates nothing
  buffer_class
      .def(py::init<std::size_t>(), py::arg("nbytes"),
           "Uninitialized host memory of nbytes, recycled when a block of that size is idle.")
      .def_property_readonly("nbytes", &HostBuffer::bytes)
      .def_property_readonly("address", [](const HostBuffer& buffer) {
        return reinterpret_cast<std::uintptr_t>(buffer.data());
      });
  m.def(
      "host_buffer_idle_bytes", [] { return host_block_pool().idle_bytes(); },
      "Bytes of idle blocks the pool keeps for the next results.");
  m.attr("HOST_BUFFER_MAX_IDLE_BYTES") = host_block_pool().max_idle_bytes();
  m.def(
      "release_host_buffers", [] { host_block_pool().release(); },
      "Frees every idle block of the pool (the blocks in use return to it when dropped).");
}

}  // namespace herd::python
