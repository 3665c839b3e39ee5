#include "src/timeline.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "common/logging.h"
#include "src/rank_file_path.h"

namespace herd::detail {
namespace {

// How often the writer writes what was recorded, and how many records wake
// it sooner, so that a busy rank's buffer stays small.
constexpr std::chrono::milliseconds kWriteInterval{50};
constexpr std::size_t kWakeWriterAt = 16384;

// The file format's version, in the header's otherData; a change of event
// names or of the header's fields raises it.
constexpr int kFormatVersion = 2;

int64_t micros_since_epoch() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The length of the valid UTF-8 sequence starting `text` (at most `left`
// bytes), or 0 when it is not one.
std::size_t utf8_sequence_length(const unsigned char* text, std::size_t left) {
  const unsigned char lead = text[0];
  std::size_t length;
  uint32_t min_code;
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
    min_code = 0x80;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    min_code = 0x800;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    min_code = 0x10000;
  } else {
    return 0;
  }
  if (length > left) return 0;
  uint32_t code = lead & (0x7F >> length);
  for (std::size_t i = 1; i < length; ++i) {
    if ((text[i] & 0xC0) != 0x80) return 0;
    code = (code << 6) | (text[i] & 0x3F);
  }
  const bool surrogate = code >= 0xD800 && code <= 0xDFFF;
  if (code < min_code || code > 0x10FFFF || surrogate) return 0;
  return length;
}

// `text` as the inside of a JSON string. Tensor names come from programs and
// may hold anything: quotes and control characters are escaped, and a byte
// that is not part of valid UTF-8 becomes U+FFFD, so that strict parsers read
// the file.
void append_json_string(fmt::memory_buffer& out, const std::string& text) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
  for (std::size_t i = 0; i < text.size();) {
    const unsigned char c = bytes[i];
    if (c == '"' || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x20) {
      fmt::format_to(std::back_inserter(out), "\\u{:04x}", c);
      ++i;
    } else if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (const std::size_t length = utf8_sequence_length(bytes + i, text.size() - i)) {
      out.append(text.data() + i, text.data() + i + length);
      i += length;
    } else {
      fmt::format_to(std::back_inserter(out), "\\ufffd");
      ++i;
    }
  }
}

}  // namespace

// The writer thread's side: the open file and what the file has said so far
// (which tensors have a pid, which spans are open on each track).
class Timeline::Writer {
 public:
  Writer(std::FILE* file, std::string path, Clock::time_point start)
      : file_(file), path_(std::move(path)), start_(start) {}
  ~Writer() {
    if (file_ != nullptr) std::fclose(file_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;

  // The opening of the file: the clock's origin and pid 0, the rank.
  Status write_header(int rank, int64_t start_micros_since_epoch) {
    fmt::format_to(std::back_inserter(out_),
                   "{{\"displayTimeUnit\":\"ms\",\"otherData\":{{\"herd_timeline_version\":{},"
                   "\"rank\":{},\"start_time_since_epoch_in_micros\":{}}},\"traceEvents\":[\n",
                   kFormatVersion, rank, start_micros_since_epoch);
    first_event_ = true;
    open_event();
    fmt::format_to(std::back_inserter(out_),
                   "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{{\"name\":"
                   "\"herd rank {}\"}}}}",
                   rank);
    open_event();
    fmt::format_to(std::back_inserter(out_),
                   "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":0,\"args\":{{"
                   "\"sort_index\":0}}}}");
    flush();
    if (failed_) {
      return Status::error(
          fmt::format("cannot write to '{}': {}", path_, std::strerror(write_errno_)));
    }
    return Status::ok();
  }

  void write(const Record& record) {
    switch (record.phase) {
      case Phase::kBegin: {
        Track& track = track_of(record.tensor, record.set_id);
        open_event();
        fmt::format_to(std::back_inserter(out_), "{{\"name\":\"{}\",\"ph\":\"B\",\"pid\":{},",
                       record.label, track.pid);
        append_tid_and_ts(record.set_id, advance(track, record.at));
        if (record.bytes >= 0) {
          fmt::format_to(std::back_inserter(out_), ",\"args\":{{\"bytes\":{}}}", record.bytes);
        }
        out_.push_back('}');
        ++track.open_spans;
        break;
      }
      case Phase::kEnd: {
        // An end without its begin: the span began in an earlier file.
        const auto named = pids_.find(record.tensor);
        if (named == pids_.end()) return;
        const auto found = tracks_.find(track_key(named->second, record.set_id));
        if (found == tracks_.end() || found->second.open_spans == 0) return;
        write_end(found->second, record.set_id, advance(found->second, record.at));
        break;
      }
      case Phase::kReady: {
        Track& track = track_of(record.tensor, record.set_id);
        open_event();
        fmt::format_to(std::back_inserter(out_),
                       "{{\"name\":\"{}\",\"ph\":\"i\",\"s\":\"t\",\"pid\":{},", record.bytes,
                       track.pid);
        append_tid_and_ts(record.set_id, advance(track, record.at));
        out_.push_back('}');
        break;
      }
      case Phase::kCycle: {
        Track& track = tracks_[track_key(0, record.set_id)];
        open_event();
        fmt::format_to(std::back_inserter(out_),
                       "{{\"name\":\"CYCLE_START\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,");
        append_tid_and_ts(record.set_id, advance(track, record.at));
        out_.push_back('}');
        break;
      }
    }
  }

  // Writes what was formatted, and makes it visible to readers of the file.
  void flush() {
    if (out_.size() > 0 && !failed_) {
      if (std::fwrite(out_.data(), 1, out_.size(), file_) != out_.size() ||
          std::fflush(file_) != 0) {
        fail();
      }
    }
    out_.clear();
  }

  // Ends every span still open at `at` and the file.
  void finish(Clock::time_point at) {
    for (auto& [key, track] : tracks_) {
      const int set_id = static_cast<int>(key & 0xFFFFFFFFu);
      while (track.open_spans > 0) write_end(track, set_id, advance(track, at));
    }
    fmt::format_to(std::back_inserter(out_), "\n]}}\n");
    flush();
    const int closed = std::fclose(file_);
    file_ = nullptr;
    if (closed != 0) fail();
  }

 private:
  struct Track {
    int pid = 0;
    int open_spans = 0;
    int64_t last_ns = 0;  // timestamps never go back on a track
  };

  static uint64_t track_key(int pid, int set_id) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(pid)) << 32) |
           static_cast<uint32_t>(set_id);
  }

  // The track of `tensor` in set `set_id`; the first sight of either names it.
  Track& track_of(const std::string& tensor, int set_id) {
    auto [named, new_tensor] = pids_.emplace(tensor, static_cast<int>(pids_.size()) + 1);
    const int pid = named->second;
    if (new_tensor) {
      open_event();
      fmt::format_to(std::back_inserter(out_),
                     "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{},\"args\":{{\"name\":\"",
                     pid);
      append_json_string(out_, tensor);
      fmt::format_to(std::back_inserter(out_), "\"}}}}");
      open_event();
      fmt::format_to(std::back_inserter(out_),
                     "{{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{},\"args\":{{"
                     "\"sort_index\":{}}}}}",
                     pid, pid);
    }
    auto [track, new_track] = tracks_.try_emplace(track_key(pid, set_id));
    if (new_track) {
      track->second.pid = pid;
      open_event();
      fmt::format_to(std::back_inserter(out_),
                     "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{},\"tid\":{},\"args\":{{"
                     "\"name\":\"process set {}\"}}}}",
                     pid, set_id, set_id);
    }
    return track->second;
  }

  // Nanoseconds from the start of the file to `at`, never before the
  // track's last event.
  int64_t advance(Track& track, Clock::time_point at) {
    const int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(at - start_).count();
    track.last_ns = std::max(track.last_ns, ns);
    return track.last_ns;
  }

  void write_end(Track& track, int set_id, int64_t ns) {
    open_event();
    fmt::format_to(std::back_inserter(out_), "{{\"ph\":\"E\",\"pid\":{},", track.pid);
    append_tid_and_ts(set_id, ns);
    out_.push_back('}');
    --track.open_spans;
  }

  // Microseconds, to the nanosecond, as the format counts them.
  void append_tid_and_ts(int set_id, int64_t ns) {
    fmt::format_to(std::back_inserter(out_), "\"tid\":{},\"ts\":{}.{:03}", set_id, ns / 1000,
                   ns % 1000);
  }

  void open_event() {
    if (!first_event_) out_.append(std::string_view(",\n"));
    first_event_ = false;
  }

  void fail() {
    if (failed_) return;
    failed_ = true;
    write_errno_ = errno;
    HERD_LOG(kWarning, "timeline: writing '{}' failed: {}; the rest of this timeline is lost",
             path_, std::strerror(write_errno_));
  }

  std::FILE* file_;
  const std::string path_;
  const Clock::time_point start_;
  fmt::memory_buffer out_;
  bool first_event_ = true;
  bool failed_ = false;
  int write_errno_ = 0;
  std::unordered_map<std::string, int> pids_;
  std::unordered_map<uint64_t, Track> tracks_;
};

Timeline::~Timeline() { stop(); }

Status Timeline::start(const std::string& path, bool mark_cycles, int rank) {
  std::lock_guard<std::mutex> control(control_mutex_);
  const std::string file_path = rank_file_path(path, rank);
  if (file_path.empty()) {
    // Only rank 0 writes a path without %r; this rank's earlier file ends.
    stop_locked();
    return Status::ok();
  }
  if (writer_thread_.joinable() && file_path == path_) {
    mark_cycles_.store(mark_cycles);
    return Status::ok();
  }
  stop_locked();
  std::FILE* file = std::fopen(file_path.c_str(), "w");
  if (file == nullptr) {
    return Status::error(
        fmt::format("cannot open '{}' for writing: {}", file_path, std::strerror(errno)));
  }
  const Clock::time_point started = Clock::now();
  auto writer = std::make_unique<Writer>(file, file_path, started);
  HERD_RETURN_IF_ERROR(writer->write_header(rank, micros_since_epoch()));
  {
    std::lock_guard<std::mutex> lock(records_mutex_);
    accepting_ = true;
    stop_requested_ = false;
    filled_ = 0;
    path_ = file_path;
  }
  mark_cycles_.store(mark_cycles);
  writer_thread_ = std::thread(
      [this, writer = std::shared_ptr<Writer>(std::move(writer))] { write_loop(writer.get()); });
  on_.store(true);
  return Status::ok();
}

void Timeline::stop() {
  std::lock_guard<std::mutex> control(control_mutex_);
  stop_locked();
}

void Timeline::stop_locked() {
  if (!writer_thread_.joinable()) return;
  on_.store(false);
  {
    std::lock_guard<std::mutex> lock(records_mutex_);
    accepting_ = false;
    stop_requested_ = true;
    path_.clear();
  }
  records_cv_.notify_one();
  writer_thread_.join();
}

std::string Timeline::path() const {
  std::lock_guard<std::mutex> lock(records_mutex_);
  return path_;
}

void Timeline::write_loop(Writer* writer) {
  std::vector<Record> batch;
  for (;;) {
    std::size_t count = 0;
    bool stopping = false;
    {
      std::unique_lock<std::mutex> lock(records_mutex_);
      records_cv_.wait_for(lock, kWriteInterval,
                           [this] { return stop_requested_ || filled_ >= kWakeWriterAt; });
      // The recorders get back the previous batch's records, whose names
      // keep their storage.
      std::swap(filling_, batch);
      count = filled_;
      filled_ = 0;
      stopping = stop_requested_;
    }
    for (std::size_t i = 0; i < count; ++i) writer->write(batch[i]);
    writer->flush();
    if (stopping) break;
  }
  writer->finish(Clock::now());
}

void Timeline::record(Phase phase, const std::string* tensor, int set_id, const char* label,
                      Clock::time_point at, int64_t bytes) {
  std::lock_guard<std::mutex> lock(records_mutex_);
  if (!accepting_) return;
  if (filled_ == filling_.size()) filling_.emplace_back();
  Record& record = filling_[filled_++];
  record.phase = phase;
  record.set_id = set_id;
  record.label = label;
  record.bytes = bytes;
  record.at = at;
  if (tensor != nullptr) {
    record.tensor.assign(*tensor);
  } else {
    record.tensor.clear();
  }
  if (filled_ == kWakeWriterAt) records_cv_.notify_one();
}

void Timeline::begin(const std::string& tensor, int set_id, const char* label, Clock::time_point at,
                     int64_t bytes) {
  if (on()) record(Phase::kBegin, &tensor, set_id, label, at, bytes);
}

void Timeline::end(const std::string& tensor, int set_id, Clock::time_point at) {
  if (on()) record(Phase::kEnd, &tensor, set_id, nullptr, at, -1);
}

void Timeline::mark_cycle(int set_id, Clock::time_point at) {
  if (on() && marks_cycles()) record(Phase::kCycle, nullptr, set_id, nullptr, at, -1);
}

void Timeline::mark_ready(const std::string& tensor, int set_id, int rank, Clock::time_point at) {
  if (on()) record(Phase::kReady, &tensor, set_id, nullptr, at, rank);
}

const char* Timeline::negotiate_label(CollectiveType type) {
  switch (type) {
    case CollectiveType::kAllreduce: return "NEGOTIATE_ALLREDUCE";
    case CollectiveType::kAllgather: return "NEGOTIATE_ALLGATHER";
    case CollectiveType::kBroadcast: return "NEGOTIATE_BROADCAST";
    case CollectiveType::kAlltoall: return "NEGOTIATE_ALLTOALL";
    case CollectiveType::kReducescatter: return "NEGOTIATE_REDUCESCATTER";
    case CollectiveType::kBarrier: return "NEGOTIATE_BARRIER";
    case CollectiveType::kGroupedAllreduce: return "NEGOTIATE_GROUPED_ALLREDUCE";
  }
  return "NEGOTIATE";
}

const char* Timeline::operation_label(CollectiveType type) {
  switch (type) {
    case CollectiveType::kAllreduce: return "ALLREDUCE";
    case CollectiveType::kAllgather: return "ALLGATHER";
    case CollectiveType::kBroadcast: return "BROADCAST";
    case CollectiveType::kAlltoall: return "ALLTOALL";
    case CollectiveType::kReducescatter: return "REDUCESCATTER";
    case CollectiveType::kBarrier: return "BARRIER";
    case CollectiveType::kGroupedAllreduce: return "GROUPED_ALLREDUCE";
  }
  return "OPERATION";
}

Timeline& process_timeline() {
  // Never destroyed: background loops may still record while the program's
  // static objects are destroyed (herd's own runtime among them).
  static Timeline* const timeline = new Timeline();
  return *timeline;
}

TimelineActivity::TimelineActivity(const std::vector<TensorEntry*>& entries, int set_id,
                                   const char* label)
    : set_id_(set_id) {
  if (!process_timeline().on()) return;
  const Timeline::Clock::time_point now = Timeline::Clock::now();
  for (TensorEntry* entry : entries) add(*entry, label, now);
}

TimelineActivity::TimelineActivity(TensorEntry& entry, int set_id, const char* label)
    : set_id_(set_id) {
  if (process_timeline().on()) add(entry, label, Timeline::Clock::now());
}

void TimelineActivity::add(TensorEntry& entry, const char* label, Timeline::Clock::time_point at) {
  const std::string* track = entry.handle ? &entry.request.name : entry.timeline_track;
  if (track == nullptr) return;
  tensors_.push_back(track);
  process_timeline().begin(*track, set_id_, label, at);
}

TimelineActivity::~TimelineActivity() {
  if (tensors_.empty()) return;
  Timeline& timeline = process_timeline();
  const Timeline::Clock::time_point now = Timeline::Clock::now();
  for (const std::string* tensor : tensors_) timeline.end(*tensor, set_id_, now);
}

}  // namespace herd::detail
