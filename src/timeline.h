// Timeline: a Chrome-trace file of what happens to each tensor on this rank
// (docs/timeline.md), started by HERD_TIMELINE at init or herd::start_timeline.
//
// The threads that run cycles (the background loops of every process set, and
// application threads driving them) only append small records to a buffer
// under a short lock: a tensor's name, a label that is a string literal, a
// clock reading. The timeline's own writer thread swaps the buffer out every
// 50 ms (sooner when it fills), formats the records as JSON and writes them,
// so no cycle waits for formatting or the disk. The buffers are reused, names included,
// so recording allocates nothing once they have grown to a batch's size.
//
// Each tensor name is one "process" of the trace (pid), each process set one
// thread of it (tid = the set's id); pid 0 is the rank itself, which carries
// the cycle marks. Instant events named by a rank mark, on a tensor's track,
// when this rank learned that that rank was ready for the tensor. Spans nest per track as the
// records say; the writer drops an end whose begin went to an earlier file (the timeline restarted
// in between) and closes the spans still open when the file is finished, so that every file holds
// well-nested spans and is valid JSON once stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "src/message.h"
#include "src/tensor_queue.h"

namespace herd::detail {

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;

  Timeline() = default;
  // Finishes the file, if one is open.
  ~Timeline();
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  // Starts writing the timeline of rank `rank` to `path`, in which "%r"
  // stands for the rank; a path without "%r" is written by rank 0 only, and
  // the other ranks record nothing. A file being written to another path is
  // finished first; the same path again only updates `mark_cycles`. Fails,
  // with the timeline stopped, when the file cannot be opened.
  [[nodiscard]] Status start(const std::string& path, bool mark_cycles, int rank);
  // Writes what was recorded, closes the open spans and the file, and joins
  // the writer thread. A no-op while stopped.
  void stop();

  // Whether records are taken: the one check recording costs while off.
  bool on() const { return on_.load(std::memory_order_relaxed); }
  bool marks_cycles() const { return mark_cycles_.load(std::memory_order_relaxed); }
  // The file being written, or "" (for tests and messages).
  std::string path() const;

  // Recording, from any thread; each is a no-op while off. `label` must be a
  // string literal: it is kept by address. A begin earlier than the start of
  // the file is moved to its start.
  void begin(const std::string& tensor, int set_id, const char* label, Clock::time_point at,
             int64_t bytes = -1);
  void end(const std::string& tensor, int set_id, Clock::time_point at);
  // A CYCLE_START mark of process set `set_id`, when marking cycles.
  void mark_cycle(int set_id, Clock::time_point at);
  // An instant event on `tensor`'s track named by `rank` (a global rank):
  // this rank learned at `at` that rank `rank` is ready for the tensor.
  void mark_ready(const std::string& tensor, int set_id, int rank, Clock::time_point at);

  // NEGOTIATE_ALLREDUCE, ...: from submission until every rank agreed.
  static const char* negotiate_label(CollectiveType type);
  // ALLREDUCE, ...: the operation itself.
  static const char* operation_label(CollectiveType type);

 private:
  enum class Phase : uint8_t { kBegin, kEnd, kCycle, kReady };
  struct Record {
    Phase phase = Phase::kBegin;
    int set_id = 0;
    const char* label = nullptr;
    int64_t bytes = -1;  // a begin's bytes, or a readiness mark's rank
    Clock::time_point at;
    std::string tensor;
  };
  class Writer;

  // Appends a record unless stopped; `tensor` may be null (cycle marks).
  void record(Phase phase, const std::string* tensor, int set_id, const char* label,
              Clock::time_point at, int64_t bytes);
  void stop_locked();
  void write_loop(Writer* writer);

  // Held by start and stop, which run one at a time.
  std::mutex control_mutex_;
  std::string path_;  // guarded by control_mutex_ and records_mutex_
  std::thread writer_thread_;
  std::atomic<bool> on_{false};
  std::atomic<bool> mark_cycles_{false};

  // Guards the records and the writer's wake-up.
  mutable std::mutex records_mutex_;
  std::condition_variable records_cv_;
  bool accepting_ = false;       // a file is open: records are taken
  bool stop_requested_ = false;  // the writer finishes the file and ends
  std::vector<Record> filling_;  // the first `filled_` are this batch's
  std::size_t filled_ = 0;
};

// The timeline of this process, which the background loops of every process
// set record into; the Runtime starts and stops it (herd::start_timeline,
// HERD_TIMELINE, herd::shutdown). Lives until the process ends.
Timeline& process_timeline();

// An activity inside the operation of each of `entries` (MEMCPY_IN_FUSION_BUFFER,
// RING_ALLREDUCE, ...), from construction to destruction, on the tracks of
// process set `set_id`, when the timeline is on. Entries without a handle
// (a joined rank's stand-ins, a group's members) have no track and are left
// out, but for one that names another's track (TensorEntry::timeline_track).
class TimelineActivity {
 public:
  TimelineActivity(const std::vector<TensorEntry*>& entries, int set_id, const char* label);
  TimelineActivity(TensorEntry& entry, int set_id, const char* label);
  ~TimelineActivity();
  TimelineActivity(const TimelineActivity&) = delete;
  TimelineActivity& operator=(const TimelineActivity&) = delete;

 private:
  void add(TensorEntry& entry, const char* label, Timeline::Clock::time_point at);

  int set_id_;
  std::vector<const std::string*> tensors_;  // empty while the timeline is off
};

}  // namespace herd::detail
