#include "collectives/shm/shm_allreduce.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "collectives/poll_backoff.h"
#include "collectives/reduction_order.h"
#include "collectives/shm/shared_buffer_registry.h"
#include "common/enforce.h"
#include "ops/stream_copy.h"

namespace herd::collectives {
namespace {

constexpr std::size_t kCacheLineBytes = 64;
constexpr std::size_t kPageBytes = 4096;
// While waiting, the peers' processes are checked once per kLivenessInterval.
constexpr std::chrono::milliseconds kLivenessInterval{100};

std::size_t round_up(std::size_t value, std::size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// A chunk of n elements from `first`, cut into one share per rank in whole
// cache lines (line_count elements): rank j's share starts j shares in, and
// the last shares may be shorter or empty. Every path cuts chunks alike, so
// each element is reduced by the same rank whichever path runs.
struct ChunkShares {
  ChunkShares(int64_t first, int64_t n, int64_t ranks, int64_t line_count)
      : first(first),
        n(n),
        share((n + ranks * line_count - 1) / (ranks * line_count) * line_count) {}
  int64_t begin(std::size_t j) const {
    return first + std::min(n, static_cast<int64_t>(j) * share);
  }
  int64_t end(std::size_t j) const { return std::min(first + n, begin(j) + share); }

  int64_t first;
  int64_t n;
  int64_t share;
};

bool process_exited(uint64_t pid) {
  return pid != 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace

std::size_t shm_chunk_bytes(bool output_streams, std::size_t slot_bytes,
                            std::size_t short_chunk_bytes) {
  return output_streams ? slot_bytes : std::min(slot_bytes, short_chunk_bytes);
}

bool shm_streams_output(std::size_t bytes, std::size_t later_bytes) {
  return bytes > 0 && bytes + std::min(later_bytes, kShmStreamingMinBytes) >= kShmStreamingMinBytes;
}

std::size_t shm_region_bytes(std::size_t slot_bytes) {
  return kPageBytes + 2 * round_up(slot_bytes, kPageBytes);
}

ShmRankControl* shm_region_control(void* region) {
  static_assert(sizeof(ShmRankControl) <= kPageBytes, "the control block fits its page");
  return static_cast<ShmRankControl*>(region);
}

uint8_t* shm_region_slot(void* region, int slot, std::size_t slot_bytes) {
  return static_cast<uint8_t*>(region) + kPageBytes +
         static_cast<std::size_t>(slot) * round_up(slot_bytes, kPageBytes);
}

ShmAllreduceGroup::ShmAllreduceGroup(int rank, std::vector<void*> regions, std::size_t slot_bytes,
                                     std::chrono::milliseconds stall_timeout,
                                     std::optional<ShmLineMode> fixed_mode)
    : rank_(rank),
      slot_bytes_(slot_bytes),
      stall_timeout_(stall_timeout),
      fixed_mode_(fixed_mode),
      read_(&process_vm_readv) {
  HERD_ENFORCE_GE(rank, 0);
  HERD_ENFORCE_LT(rank, static_cast<int>(regions.size()));
  HERD_ENFORCE_GE(slot_bytes, kCacheLineBytes);
  for (void* region : regions) {
    controls_.push_back(shm_region_control(region));
    for (int k = 0; k < 2; ++k) slots_[k].push_back(shm_region_slot(region, k, slot_bytes));
  }
  // Every rank's counters start where this rank's do: a group is made once
  // per region, before any rank's first allreduce.
  ShmRankControl* mine = controls_[static_cast<std::size_t>(rank_)];
  sequence_ = mine->arrived.value.load();
  mine->self.value.store(reinterpret_cast<uint64_t>(mine));
  peer_mappings_.resize(regions.size());
  peer_inputs_.resize(regions.size());
  peer_outputs_.resize(regions.size());
}

ShmAllreduceGroup::PeerMapping::PeerMapping(PeerMapping&& other) noexcept
    : fd(other.fd), id(other.id), data(other.data), bytes(other.bytes) {
  other.data = nullptr;
}

ShmAllreduceGroup::PeerMapping& ShmAllreduceGroup::PeerMapping::operator=(
    PeerMapping&& other) noexcept {
  if (this != &other) {
    if (data != nullptr) munmap(const_cast<uint8_t*>(data), bytes);
    fd = other.fd;
    id = other.id;
    data = other.data;
    bytes = other.bytes;
    other.data = nullptr;
  }
  return *this;
}

ShmAllreduceGroup::PeerMapping::~PeerMapping() {
  if (data != nullptr) munmap(const_cast<uint8_t*>(data), bytes);
}

const uint8_t* ShmAllreduceGroup::peer_buffer(int j, uint64_t id, uint64_t fd,
                                              std::size_t* mapped_bytes) {
  std::vector<PeerMapping>& mappings = peer_mappings_[static_cast<std::size_t>(j)];
  for (auto it = mappings.begin(); it != mappings.end(); ++it) {
    if (it->fd != fd) continue;
    if (it->id == id) {
      *mapped_bytes = it->bytes;
      return it->data;
    }
    // The rank released that buffer and its fd now holds another.
    mappings.erase(it);
    break;
  }
  const uint64_t pid = controls_[static_cast<std::size_t>(j)]->pid.value.load();
  const std::string path = fmt::format("/proc/{}/fd/{}", pid, fd);
  const int local_fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (local_fd < 0) return nullptr;
  struct stat file {};
  void* data = MAP_FAILED;
  if (fstat(local_fd, &file) == 0 && file.st_size > 0) {
    data = mmap(nullptr, static_cast<std::size_t>(file.st_size), PROT_READ,
                MAP_SHARED | MAP_POPULATE, local_fd, 0);
  }
  close(local_fd);
  if (data == MAP_FAILED) return nullptr;
  mappings.emplace_back(fd, id, static_cast<const uint8_t*>(data),
                        static_cast<std::size_t>(file.st_size));
  *mapped_bytes = mappings.back().bytes;
  return mappings.back().data;
}

bool ShmAllreduceGroup::map_peer_buffers(std::size_t bytes) {
  for (int j = 0; j < size(); ++j) {
    if (j == rank_) continue;
    const ShmRankControl& peer = *controls_[static_cast<std::size_t>(j)];
    const auto map = [&](const ShmCounter& id, const ShmCounter& fd,
                         const ShmCounter& offset) -> const uint8_t* {
      std::size_t mapped_bytes = 0;
      const uint8_t* data = peer_buffer(j, id.value.load(std::memory_order_relaxed),
                                        fd.value.load(std::memory_order_relaxed), &mapped_bytes);
      const uint64_t at = offset.value.load(std::memory_order_relaxed);
      if (data == nullptr || at > mapped_bytes || bytes > mapped_bytes - at) return nullptr;
      return data + at;
    };
    peer_inputs_[static_cast<std::size_t>(j)] =
        map(peer.input_id, peer.input_fd, peer.input_offset);
    peer_outputs_[static_cast<std::size_t>(j)] =
        map(peer.output_id, peer.output_fd, peer.output_offset);
    if (peer_inputs_[static_cast<std::size_t>(j)] == nullptr ||
        peer_outputs_[static_cast<std::size_t>(j)] == nullptr) {
      return false;
    }
  }
  return true;
}

Status ShmAllreduceGroup::allreduce_direct(const uint8_t* in, uint8_t* out, int64_t count,
                                           std::size_t element_size, const ops::ReduceFn& reduce,
                                           const FinishFn& finish, bool streaming) {
  const auto ranks = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank_);
  const auto chunk_count = static_cast<int64_t>(kShmDirectChunkBytes / element_size);
  const int64_t line_count = static_cast<int64_t>(kCacheLineBytes / element_size);
  const int64_t chunks = (count + chunk_count - 1) / chunk_count;
  ShmRankControl& mine = *controls_[me];
  peer_inputs_[me] = in;
  peer_outputs_[me] = out;
  std::vector<const void*> sources(ranks);
  const auto bytes_of = [element_size](int64_t elements) {
    return static_cast<std::size_t>(elements) * element_size;
  };

  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t first = chunk * chunk_count;
    const int64_t n = std::min(chunk_count, count - first);
    const uint64_t sequence = ++sequence_;
    const ChunkShares shares(first, n, static_cast<int64_t>(ranks), line_count);

    const int64_t length = shares.end(me) - shares.begin(me);
    if (length > 0) {
      const std::size_t at = bytes_of(shares.begin(me));
      for (std::size_t j = 0; j < ranks; ++j) sources[j] = peer_inputs_[j] + at;
      // In place, out + at is this rank's own input share: the fold reads
      // each element before it writes it.
      detail::fold_in_reduction_order(out + at, sources.data(), static_cast<int>(ranks), length,
                                      element_size, reduce);
      if (finish) finish(out + at, length);
    }
    mine.reduced.value.store(sequence, std::memory_order_release);
    HERD_RETURN_IF_ERROR(
        wait_for_all(&ShmRankControl::reduced, sequence, "reducing", chunk, chunks));

    for (std::size_t j = 0; j < ranks; ++j) {
      if (j == me || shares.end(j) <= shares.begin(j)) continue;
      const std::size_t at = bytes_of(shares.begin(j));
      const std::size_t bytes = bytes_of(shares.end(j) - shares.begin(j));
      if (streaming) {
        ops::stream_copy(out + at, peer_outputs_[j] + at, bytes);
      } else {
        std::memcpy(out + at, peer_outputs_[j] + at, bytes);
      }
    }
  }
  // The caller may hand the output to another thread once this returns.
  if (streaming) ops::stream_fence();
  // Every rank stays until no other rank reads its buffers any more.
  const uint64_t finished = ++sequence_;
  mine.arrived.value.store(finished, std::memory_order_release);
  return wait_for_all(&ShmRankControl::arrived, finished, "copying out", chunks - 1, chunks);
}

Status ShmAllreduceGroup::probe_single_copy() const {
  // The pid counter's place in a control block, the same in every process.
  const ShmRankControl& mine = *controls_[static_cast<std::size_t>(rank_)];
  const auto pid_offset = static_cast<uint64_t>(reinterpret_cast<const uint8_t*>(&mine.pid) -
                                                reinterpret_cast<const uint8_t*>(&mine));
  for (int j = 0; j < size(); ++j) {
    if (j == rank_) continue;
    const ShmRankControl& peer = *controls_[static_cast<std::size_t>(j)];
    const uint64_t pid = peer.pid.value.load();
    uint64_t read_pid = 0;
    iovec local{&read_pid, sizeof(read_pid)};
    iovec remote{reinterpret_cast<void*>(peer.self.value.load() + pid_offset), sizeof(read_pid)};
    const ssize_t read = read_(static_cast<pid_t>(pid), &local, 1, &remote, 1, 0);
    if (read != static_cast<ssize_t>(sizeof(read_pid))) {
      const int error = read < 0 ? errno : EFAULT;
      return Status::error(
          fmt::format("rank {} cannot read the memory of rank {} (pid {}) with process_vm_readv: "
                      "{} (needs the same user and ptrace allowed: "
                      "/proc/sys/kernel/yama/ptrace_scope 0, or CAP_SYS_PTRACE, and no seccomp "
                      "filter refusing it)",
                      rank_, j, pid, std::strerror(error)) +
          named(j));
    }
    if (read_pid != pid) {
      return Status::error(fmt::format(
          "rank {} read pid {} from the memory of rank {} (pid {}): not that rank's process", rank_,
          read_pid, j, pid));
    }
  }
  return Status::ok();
}

Status ShmAllreduceGroup::read_peer(int j, void* local, uint64_t remote, std::size_t bytes,
                                    const char* what, std::size_t offset, std::size_t total_bytes,
                                    int64_t chunk, int64_t chunks) {
  const uint64_t pid = controls_[static_cast<std::size_t>(j)]->pid.value.load();
  std::size_t done = 0;
  while (done < bytes) {
    iovec to{static_cast<uint8_t*>(local) + done, bytes - done};
    iovec from{reinterpret_cast<void*>(remote + done), bytes - done};
    const ssize_t read = read_(static_cast<pid_t>(pid), &to, 1, &from, 1, 0);
    if (read <= 0) {
      // 0: none of the rest could be read, which the kernel reports as a
      // short read rather than EFAULT.
      const int error = read < 0 ? errno : EFAULT;
      return fail_wait(
          fmt::format("shm allreduce: rank {} could not read rank {}'s (pid {}) {} in chunk {} "
                      "of {} of a {}-byte call ({} bytes at offset {}): process_vm_readv: {}{}",
                      rank_, j, pid, what, chunk, chunks, total_bytes, bytes - done, offset + done,
                      std::strerror(error), error == ESRCH ? " (the process has exited)" : "") +
          named(j));
    }
    done += static_cast<std::size_t>(read);
  }
  return Status::ok();
}

Status ShmAllreduceGroup::allreduce_single_copy(const uint8_t* in, uint8_t* out, int64_t count,
                                                std::size_t element_size,
                                                const ops::ReduceFn& reduce,
                                                const FinishFn& finish) {
  const auto ranks = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank_);
  const std::size_t total_bytes = static_cast<std::size_t>(count) * element_size;
  const auto chunk_count = static_cast<int64_t>(kShmSingleCopyChunkBytes / element_size);
  const auto block_count = static_cast<int64_t>(kShmSingleCopyBlockBytes / element_size);
  const int64_t line_count = static_cast<int64_t>(kCacheLineBytes / element_size);
  const int64_t chunks = (count + chunk_count - 1) / chunk_count;
  ShmRankControl& mine = *controls_[me];

  std::vector<uint64_t> inputs(ranks);
  std::vector<uint64_t> outputs(ranks);
  for (std::size_t j = 0; j < ranks; ++j) {
    inputs[j] = controls_[j]->input.value.load(std::memory_order_relaxed);
    outputs[j] = controls_[j]->output.value.load(std::memory_order_relaxed);
  }
  scratch_.resize(ranks * kShmSingleCopyBlockBytes);
  std::vector<const void*> sources(ranks);
  const auto bytes_of = [element_size](int64_t elements) {
    return static_cast<std::size_t>(elements) * element_size;
  };

  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t first = chunk * chunk_count;
    const int64_t n = std::min(chunk_count, count - first);
    const uint64_t sequence = ++sequence_;
    const ChunkShares shares(first, n, static_cast<int64_t>(ranks), line_count);

    for (int64_t lo = shares.begin(me); lo < shares.end(me); lo += block_count) {
      const int64_t length = std::min(block_count, shares.end(me) - lo);
      const std::size_t at = bytes_of(lo);
      for (std::size_t j = 0; j < ranks; ++j) {
        if (j == me) {
          sources[j] = in + at;
          continue;
        }
        uint8_t* block = scratch_.data() + j * kShmSingleCopyBlockBytes;
        HERD_RETURN_IF_ERROR(read_peer(static_cast<int>(j), block, inputs[j] + at, bytes_of(length),
                                       "input", at, total_bytes, chunk, chunks));
        sources[j] = block;
      }
      // In place, out + at is this rank's own input block: the fold reads
      // each element before it writes it.
      detail::fold_in_reduction_order(out + at, sources.data(), static_cast<int>(ranks), length,
                                      element_size, reduce);
      if (finish) finish(out + at, length);
    }
    mine.reduced.value.store(sequence, std::memory_order_release);
    HERD_RETURN_IF_ERROR(
        wait_for_all(&ShmRankControl::reduced, sequence, "reducing", chunk, chunks));

    for (std::size_t j = 0; j < ranks; ++j) {
      if (j == me || shares.end(j) <= shares.begin(j)) continue;
      const std::size_t at = bytes_of(shares.begin(j));
      HERD_RETURN_IF_ERROR(read_peer(static_cast<int>(j), out + at, outputs[j] + at,
                                     bytes_of(shares.end(j) - shares.begin(j)), "result", at,
                                     total_bytes, chunk, chunks));
    }
  }
  // Every rank stays until no other rank reads its buffers any more.
  const uint64_t finished = ++sequence_;
  mine.arrived.value.store(finished, std::memory_order_release);
  return wait_for_all(&ShmRankControl::arrived, finished, "copying out", chunks - 1, chunks);
}

void ShmAllreduceGroup::set_wait_hooks(ShmWaitHooks hooks) { hooks_ = std::move(hooks); }

void ShmAllreduceGroup::set_short_chunk_bytes(std::size_t bytes) {
  HERD_ENFORCE_GE(bytes, kCacheLineBytes);
  HERD_ENFORCE_EQ(bytes % kCacheLineBytes, std::size_t{0});
  short_chunk_bytes_ = bytes;
}

Status ShmAllreduceGroup::wait_for_all(ShmCounter ShmRankControl::*counter, uint64_t sequence,
                                       const char* phase, int64_t chunk, int64_t chunks) {
  using Clock = std::chrono::steady_clock;
  // The slow checks run only once a wait sleeps (PollBackoff): most waits
  // end within a few polls, two per chunk.
  Clock::time_point next_liveness_check{};
  for (int j = 0; j < size(); ++j) {
    const std::atomic<uint64_t>& value = (controls_[static_cast<std::size_t>(j)]->*counter).value;
    // Yield from the first clock reading on: with more ranks than cores,
    // spinning here keeps the peer this barrier waits for off the core.
    PollBackoff backoff(std::chrono::microseconds{0});
    while (value.load(std::memory_order_acquire) < sequence) {
      if (!backoff.after_fruitless_poll()) continue;
      const Clock::time_point now = Clock::now();
      if (now >= next_liveness_check) {
        next_liveness_check = now + kLivenessInterval;
        const uint64_t pid = controls_[static_cast<std::size_t>(j)]->pid.value.load();
        if (process_exited(pid)) {
          return fail_wait(
              fmt::format(
                  "shm allreduce: rank {} (pid {}) exited; rank {} was waiting for it to finish {} "
                  "of chunk {} of {}",
                  j, pid, rank_, phase, chunk, chunks) +
              named(j));
        }
      }
      if (hooks_.fault) {
        if (const std::optional<std::string> fault = hooks_.fault()) {
          return Status::error(
              fmt::format("shm allreduce: rank {} waiting for {} of chunk {} of "
                          "{}: stopped: {}",
                          rank_, phase, chunk, chunks, *fault));
        }
      }
      if (stall_timeout_.count() > 0 && backoff.idle_for() > stall_timeout_) {
        return fail_wait(
            fmt::format(
                "shm allreduce: rank {} did not finish {} of chunk {} of {} within {} ms "
                "(HERD_COLLECTIVE_TIMEOUT; rank {} waiting; sequence {}, the peer is at {})",
                j, phase, chunk, chunks, stall_timeout_.count(), rank_, sequence,
                value.load(std::memory_order_acquire)) +
            named(j));
      }
    }
  }
  return Status::ok();
}

std::string ShmAllreduceGroup::named(int rank) const {
  return hooks_.describe ? "; it is " + hooks_.describe(rank) : std::string();
}

Status ShmAllreduceGroup::fail_wait(const std::string& message) const {
  if (hooks_.failed) hooks_.failed(message);
  return Status::error(message);
}

Status ShmAllreduceGroup::allreduce(const void* input, void* output, int64_t count,
                                    std::size_t element_size, const ops::ReduceFn& reduce,
                                    const FinishFn& finish, std::size_t later_bytes) {
  HERD_ENFORCE_GE(element_size, std::size_t{1});
  HERD_ENFORCE_EQ(kCacheLineBytes % element_size, std::size_t{0});
  const auto ranks = static_cast<std::size_t>(size());
  const auto me = static_cast<std::size_t>(rank_);
  const std::size_t total_bytes = static_cast<std::size_t>(count) * element_size;
  const bool streaming = shm_streams_output(total_bytes, later_bytes);
  const auto chunk_count = static_cast<int64_t>(
      shm_chunk_bytes(streaming, slot_bytes_, short_chunk_bytes_) / element_size);
  const int64_t line_count = static_cast<int64_t>(kCacheLineBytes / element_size);
  const int64_t chunks = count == 0 ? 0 : (count + chunk_count - 1) / chunk_count;
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  const bool single_copy_size =
      total_bytes >= single_copy_min_bytes_ && total_bytes < single_copy_end_bytes_;
  const bool direct_size = total_bytes >= direct_min_bytes_;
  if (count > 0 && size() > 1 && (single_copy_size || direct_size)) {
    // Rank 0 chooses between single copy and the slots: a call whose output
    // streams comes from memory and goes back there, where the slot path
    // moves fewer bytes through memory (the others may differ in
    // later_bytes). Every rank publishes its buffers in case.
    ShmRankControl& mine = *controls_[me];
    mine.input.value.store(reinterpret_cast<uint64_t>(in), std::memory_order_relaxed);
    mine.output.value.store(reinterpret_cast<uint64_t>(out), std::memory_order_relaxed);
    std::optional<SharedBufferRange> input_buffer;
    std::optional<SharedBufferRange> output_buffer;
    if (direct_size) {
      input_buffer = find_shared_buffer(in, total_bytes);
      output_buffer = in == out ? input_buffer : find_shared_buffer(out, total_bytes);
    }
    const auto publish = [](const std::optional<SharedBufferRange>& buffer, ShmCounter& id,
                            ShmCounter& fd, ShmCounter& offset) {
      id.value.store(buffer ? buffer->id : 0, std::memory_order_relaxed);
      fd.value.store(buffer ? static_cast<uint64_t>(buffer->fd) : 0, std::memory_order_relaxed);
      offset.value.store(buffer ? buffer->offset : 0, std::memory_order_relaxed);
    };
    publish(input_buffer, mine.input_id, mine.input_fd, mine.input_offset);
    publish(output_buffer, mine.output_id, mine.output_fd, mine.output_offset);
    if (rank_ == 0) {
      mine.single_copy.value.store(single_copy_size && !streaming ? 1 : 0,
                                   std::memory_order_relaxed);
    }
    const uint64_t published = ++sequence_;
    mine.arrived.value.store(published, std::memory_order_release);
    HERD_RETURN_IF_ERROR(
        wait_for_all(&ShmRankControl::arrived, published, "publishing its buffers", 0, chunks));
    // What every rank published, so the same on every rank.
    const bool registered =
        direct_size && std::all_of(controls_.begin(), controls_.end(), [](ShmRankControl* c) {
          return c->input_id.value.load(std::memory_order_relaxed) != 0 &&
                 c->output_id.value.load(std::memory_order_relaxed) != 0;
        });
    if (registered) {
      // Whether this rank could map is its own: the ranks vote.
      const uint64_t voted = ++sequence_;
      mine.mapped.value.store(map_peer_buffers(total_bytes) ? voted : 0, std::memory_order_relaxed);
      mine.arrived.value.store(voted, std::memory_order_release);
      HERD_RETURN_IF_ERROR(
          wait_for_all(&ShmRankControl::arrived, voted, "mapping the others' buffers", 0, chunks));
      if (std::all_of(controls_.begin(), controls_.end(), [voted](ShmRankControl* c) {
            return c->mapped.value.load(std::memory_order_relaxed) == voted;
          })) {
        return allreduce_direct(in, out, count, element_size, reduce, finish, streaming);
      }
    }
    if (single_copy_size && controls_[0]->single_copy.value.load(std::memory_order_relaxed) == 1) {
      return allreduce_single_copy(in, out, count, element_size, reduce, finish);
    }
  }
  ShmRankControl& mine = *controls_[me];
  // Rank 0 picks the call's mode and publishes it before its first
  // `arrived`; the others read it once that has arrived.
  ShmLineMode mode = ShmLineMode::kKeep;
  const bool timed = rank_ == 0 && !fixed_mode_ && ShmModeChooser::adapts(total_bytes);
  const auto start =
      timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (rank_ == 0 && chunks > 0) {
    mode = fixed_mode_ ? *fixed_mode_ : chooser_.choose(total_bytes);
    mine.mode.value.store(static_cast<uint64_t>(mode), std::memory_order_relaxed);
  }

  // Each chunk's operands for the fold, allocated once per call.
  std::vector<const void*> sources(ranks);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    const int64_t first = chunk * chunk_count;
    const int64_t n = std::min(chunk_count, count - first);
    const uint64_t sequence = ++sequence_;
    const std::vector<uint8_t*>& slot = slots_[sequence % 2];
    const std::size_t offset = static_cast<std::size_t>(first) * element_size;

    // Shares in whole cache lines: rank j reduces [j * share, (j + 1) * share).
    const ChunkShares shares(0, n, static_cast<int64_t>(ranks), line_count);
    const auto bytes_of = [element_size](int64_t elements) {
      return static_cast<std::size_t>(elements) * element_size;
    };

    // Only the shares other ranks reduce are copied in: this rank reads its
    // own share of the input where it lies.
    for (std::size_t j = 0; j < ranks; ++j) {
      if (j == me || shares.end(j) <= shares.begin(j)) continue;
      const std::size_t at = bytes_of(shares.begin(j));
      std::memcpy(slot[me] + at, in + offset + at, bytes_of(shares.end(j) - shares.begin(j)));
    }
    mine.arrived.value.store(sequence, std::memory_order_release);
    HERD_RETURN_IF_ERROR(
        wait_for_all(&ShmRankControl::arrived, sequence, "copying in", chunk, chunks));
    if (rank_ != 0 && chunk == 0) {
      mode = static_cast<ShmLineMode>(controls_[0]->mode.value.load(std::memory_order_relaxed));
    }

    const int64_t lo = shares.begin(me);
    const int64_t mine_count = shares.end(me) - lo;
    if (mine_count > 0) {
      // In the reduction order (reduction_order.h), this rank's input read
      // where it lies: the bits do not depend on which rank owns the share.
      uint8_t* dst = slot[me] + bytes_of(lo);
      for (std::size_t j = 0; j < ranks; ++j) {
        sources[j] = j == me ? in + offset + bytes_of(lo) : slot[j] + bytes_of(lo);
      }
      detail::fold_in_reduction_order(dst, sources.data(), static_cast<int>(ranks), mine_count,
                                      element_size, reduce);
      if (finish) finish(dst, mine_count);
    }
    mine.reduced.value.store(sequence, std::memory_order_release);
    HERD_RETURN_IF_ERROR(
        wait_for_all(&ShmRankControl::reduced, sequence, "reducing", chunk, chunks));

    for (std::size_t j = 0; j < ranks; ++j) {
      if (shares.end(j) <= shares.begin(j)) continue;
      const std::size_t at = bytes_of(shares.begin(j));
      const std::size_t length = bytes_of(shares.end(j) - shares.begin(j));
      if (streaming) {
        ops::stream_copy(out + offset + at, slot[j] + at, length);
      } else {
        std::memcpy(out + offset + at, slot[j] + at, length);
      }
    }
    if (mode == ShmLineMode::kEvict) {
      // Only the lines this rank read: of rank j's slot, the share it
      // reduced from it and share j, copied out. Flushing the rest would
      // write back lines that the other ranks read or rank j still has
      // dirty (from 3 ranks on), for nothing.
      for (std::size_t j = 0; j < ranks; ++j) {
        if (j == me) continue;
        for (const std::size_t s : {me, j}) {
          if (shares.end(s) <= shares.begin(s)) continue;
          evict_lines(slot[j] + bytes_of(shares.begin(s)),
                      bytes_of(shares.end(s) - shares.begin(s)));
        }
      }
    }
  }
  // The caller may hand the output to another thread once this returns.
  if (streaming) ops::stream_fence();
  if (timed) {
    chooser_.record(
        total_bytes, mode,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return Status::ok();
}

}  // namespace herd::collectives
