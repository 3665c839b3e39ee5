// Timeline (src/timeline.h) on its own, without MPI: the file it writes is
// parsed back as JSON and compared with the events recorded; which rank
// writes which path; a restart and the spans it cuts; names that JSON must
// escape; a file that cannot be opened.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "src/rank_file_path.h"
#include "src/timeline.h"

namespace herd::detail {
namespace {

using json = nlohmann::json;
using Clock = Timeline::Clock;

// A fresh directory under /tmp, removed with what the test wrote into it.
class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/herd_timeline_unit_XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    for (const std::string& file : written_) std::remove(file.c_str());
    rmdir(path_.c_str());
  }
  std::string file(const std::string& name) {
    written_.push_back(path_ + "/" + name);
    return written_.back();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::string> written_;
};

bool exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

json parse_file(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());  // throws, failing the test, on invalid JSON
}

// The events of one track, "B:<name>", "E" and "i:<name>", in file order.
std::vector<std::string> track_events(const json& trace, int pid, int tid) {
  std::vector<std::string> events;
  for (const json& event : trace.at("traceEvents")) {
    const std::string phase = event.at("ph");
    if (phase == "M" || event.at("pid") != pid || event.at("tid") != tid) continue;
    if (phase == "B") events.push_back("B:" + event.at("name").get<std::string>());
    if (phase == "E") events.push_back("E");
    if (phase == "i") events.push_back("i:" + event.at("name").get<std::string>());
  }
  return events;
}

// Tensor name -> pid, from the process_name metadata (pid 0 is the rank).
std::map<std::string, int> pids_by_name(const json& trace) {
  std::map<std::string, int> pids;
  for (const json& event : trace.at("traceEvents")) {
    if (event.at("ph") != "M" || event.at("name") != "process_name") continue;
    const int pid = event.at("pid");
    if (pid == 0) continue;
    CHECK(pids.emplace(event.at("args").at("name").get<std::string>(), pid).second);
  }
  return pids;
}

int64_t micros_since_epoch() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST_CASE("timeline: spans, cycle marks and the header, as recorded", "[timeline]") {
  TempDir dir;
  const std::string path = dir.file("t.json");
  Timeline timeline;
  CHECK_FALSE(timeline.on());
  const int64_t before = micros_since_epoch();
  REQUIRE(timeline.start(path, true, 0).is_ok());
  const int64_t after = micros_since_epoch();
  CHECK(timeline.on());
  CHECK(timeline.marks_cycles());
  CHECK(timeline.path() == path);

  const std::string a = "allreduce.a";
  const std::string b = "allgather.b";
  const Clock::time_point t0 = Clock::now();
  const auto at = [&](int micros) { return t0 + std::chrono::microseconds(micros); };
  timeline.mark_cycle(0, at(0));
  timeline.begin(a, 0, Timeline::negotiate_label(CollectiveType::kAllreduce), at(1));
  timeline.begin(b, 2, Timeline::negotiate_label(CollectiveType::kAllgather), at(2));
  timeline.end(a, 0, at(10));
  timeline.begin(a, 0, Timeline::operation_label(CollectiveType::kAllreduce), at(10), 12);
  timeline.begin(a, 0, "RING_ALLREDUCE", at(11));
  timeline.end(a, 0, at(20));
  timeline.end(a, 0, at(21));
  timeline.mark_cycle(2, at(30));
  // Still open at the stop: b's negotiation, which the writer closes.
  timeline.stop();
  CHECK_FALSE(timeline.on());
  CHECK(timeline.path().empty());

  const json trace = parse_file(path);
  const json& other = trace.at("otherData");
  CHECK(other.at("rank") == 0);
  const int64_t start = other.at("start_time_since_epoch_in_micros");
  CHECK(start >= before);
  CHECK(start <= after);

  const std::map<std::string, int> pids = pids_by_name(trace);
  REQUIRE(pids == std::map<std::string, int>{{a, 1}, {b, 2}});
  CHECK(track_events(trace, 1, 0) == std::vector<std::string>{"B:NEGOTIATE_ALLREDUCE", "E",
                                                              "B:ALLREDUCE", "B:RING_ALLREDUCE",
                                                              "E", "E"});
  CHECK(track_events(trace, 2, 2) == std::vector<std::string>{"B:NEGOTIATE_ALLGATHER", "E"});
  CHECK(track_events(trace, 0, 0) == std::vector<std::string>{"i:CYCLE_START"});
  CHECK(track_events(trace, 0, 2) == std::vector<std::string>{"i:CYCLE_START"});

  // Timestamps are microseconds from the start, as recorded, never going
  // back on a track; the bytes ride on the operation's begin.
  std::vector<double> times;
  for (const json& event : trace.at("traceEvents")) {
    if (event.at("ph") == "M" || event.at("pid") != 1) continue;
    times.push_back(event.at("ts").get<double>());
    if (event.value("name", "") == "ALLREDUCE") CHECK(event.at("args").at("bytes") == 12);
  }
  REQUIRE(times.size() == 6);
  for (std::size_t i = 1; i < times.size(); ++i) CHECK(times[i] >= times[i - 1]);
  CHECK(times[1] - times[0] == Approx(9.0).margin(0.002));  // 1 us to 10 us
  CHECK(times[4] - times[3] == Approx(9.0).margin(0.002));  // 11 us to 20 us
}

TEST_CASE("timeline: records while stopped are dropped", "[timeline]") {
  TempDir dir;
  const std::string path = dir.file("t.json");
  Timeline timeline;
  const std::string name = "allreduce.x";
  timeline.begin(name, 0, "ALLREDUCE", Clock::now());
  timeline.mark_cycle(0, Clock::now());
  REQUIRE(timeline.start(path, false, 0).is_ok());
  // Without mark_cycles, no marks; an end whose begin was not recorded is
  // dropped, so the file stays well nested.
  timeline.mark_cycle(0, Clock::now());
  timeline.end(name, 0, Clock::now());
  timeline.stop();
  timeline.stop();  // a second stop does nothing
  const json trace = parse_file(path);
  CHECK(pids_by_name(trace).empty());
  CHECK(track_events(trace, 0, 0).empty());
}

TEST_CASE("timeline: a restart finishes the first file and cuts its spans", "[timeline]") {
  TempDir dir;
  const std::string first = dir.file("first.json");
  const std::string second = dir.file("second.json");
  Timeline timeline;
  const std::string name = "allreduce.y";
  REQUIRE(timeline.start(first, false, 0).is_ok());
  timeline.begin(name, 0, "NEGOTIATE_ALLREDUCE", Clock::now());
  REQUIRE(timeline.start(second, false, 0).is_ok());
  CHECK(timeline.path() == second);
  // The negotiation's end and the operation, in the second file.
  timeline.end(name, 0, Clock::now());
  timeline.begin(name, 0, "ALLREDUCE", Clock::now());
  // The same path again keeps the file and changes the marks only.
  REQUIRE(timeline.start(second, true, 0).is_ok());
  CHECK(timeline.marks_cycles());
  timeline.mark_cycle(0, Clock::now());
  timeline.end(name, 0, Clock::now());
  timeline.stop();

  const json one = parse_file(first);
  CHECK(track_events(one, 1, 0) == std::vector<std::string>{"B:NEGOTIATE_ALLREDUCE", "E"});
  const json two = parse_file(second);
  CHECK(pids_by_name(two) == std::map<std::string, int>{{name, 1}});
  CHECK(track_events(two, 1, 0) == std::vector<std::string>{"B:ALLREDUCE", "E"});
  CHECK(track_events(two, 0, 0) == std::vector<std::string>{"i:CYCLE_START"});
}

TEST_CASE("timeline: %r gives each rank a file; without it rank 0 alone writes", "[timeline]") {
  TempDir dir;
  const std::string pattern = dir.path() + "/t.%r.%r.json";
  const std::string rank_3 = dir.file("t.3.3.json");
  Timeline timeline;
  REQUIRE(timeline.start(pattern, false, 3).is_ok());
  CHECK(timeline.path() == rank_3);
  timeline.stop();
  CHECK(parse_file(rank_3).at("otherData").at("rank") == 3);

  const std::string shared = dir.file("shared.json");
  REQUIRE(timeline.start(shared, false, 1).is_ok());
  CHECK_FALSE(timeline.on());
  CHECK_FALSE(exists(shared));
  REQUIRE(timeline.start(shared, false, 0).is_ok());
  CHECK(timeline.on());
  timeline.stop();
  CHECK(exists(shared));
}

TEST_CASE("timeline: names are escaped into valid JSON", "[timeline]") {
  TempDir dir;
  const std::string path = dir.file("t.json");
  // A quote, a backslash, control characters, valid UTF-8 (e acute, a
  // three-byte and a four-byte character) and bytes that are not UTF-8: a
  // lone continuation byte, a truncated sequence, an overlong encoding.
  const std::vector<std::pair<std::string, std::string>> names = {
      {"say \"hi\"\\", "say \"hi\"\\"},
      {"tab\tnewline\n\x01", "tab\tnewline\n\x01"},
      {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x91", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x91"},
      {"bad\x80 cut\xe2\x82", "bad\xef\xbf\xbd cut\xef\xbf\xbd\xef\xbf\xbd"},
      {"overlong\xc0\xaf", "overlong\xef\xbf\xbd\xef\xbf\xbd"},
  };
  Timeline timeline;
  REQUIRE(timeline.start(path, false, 0).is_ok());
  for (const auto& [name, read_back] : names) {
    timeline.begin(name, 0, "ALLREDUCE", Clock::now());
    timeline.end(name, 0, Clock::now());
  }
  timeline.stop();
  const std::map<std::string, int> pids = pids_by_name(parse_file(path));
  REQUIRE(pids.size() == names.size());
  int pid = 1;
  for (const auto& [name, read_back] : names) {
    INFO(read_back);
    REQUIRE(pids.count(read_back) == 1);
    CHECK(pids.at(read_back) == pid++);
  }
}

TEST_CASE("timeline: a file that cannot be opened fails the start", "[timeline]") {
  TempDir dir;
  const std::string path = dir.path() + "/missing/t.json";
  Timeline timeline;
  const Status status = timeline.start(path, false, 0);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == "cannot open '" + path + "' for writing: No such file or directory");
  CHECK_FALSE(timeline.on());
  // A failed start of a new path ends the old file too.
  const std::string good = dir.file("good.json");
  REQUIRE(timeline.start(good, false, 0).is_ok());
  REQUIRE_FALSE(timeline.start(path, false, 0).is_ok());
  CHECK_FALSE(timeline.on());
  CHECK(parse_file(good).at("traceEvents").size() == 2);  // pid 0's name and sort index
}

TEST_CASE("timeline: many records across batches arrive in order", "[timeline]") {
  TempDir dir;
  const std::string path = dir.file("t.json");
  Timeline timeline;
  REQUIRE(timeline.start(path, false, 0).is_ok());
  // More than one batch of the writer (it wakes at 16384 records), from two
  // threads on tracks of their own.
  constexpr int kSpans = 20000;
  auto record = [&](int set_id) {
    const std::string name = "allreduce.many";
    for (int i = 0; i < kSpans; ++i) {
      timeline.begin(name, set_id, "ALLREDUCE", Clock::now(), i);
      timeline.end(name, set_id, Clock::now());
    }
  };
  std::thread other(record, 1);
  record(0);
  other.join();
  timeline.stop();
  const json trace = parse_file(path);
  for (int set_id : {0, 1}) {
    int64_t next = 0;
    for (const json& event : trace.at("traceEvents")) {
      if (event.at("ph") != "B" || event.at("tid") != set_id) continue;
      CHECK(event.at("args").at("bytes") == next);
      ++next;
    }
    CHECK(next == kSpans);
  }
}

}  // namespace
}  // namespace herd::detail

namespace herd::detail {

TEST_CASE("timeline: readiness marks are instants named by the rank", "[timeline]") {
  TempDir dir;
  const std::string path = dir.file("ready.json");
  Timeline timeline;
  REQUIRE(timeline.start(path, false, 0).is_ok());
  const std::string a = "allreduce.a";
  const Clock::time_point t0 = Clock::now();
  const auto at = [&](int micros) { return t0 + std::chrono::microseconds(micros); };
  // Rank 3 was ready before this rank submitted; rank 0 then rank 12 after.
  timeline.mark_ready(a, 1, 3, at(5));
  timeline.begin(a, 1, Timeline::negotiate_label(CollectiveType::kAllreduce), at(10));
  timeline.mark_ready(a, 1, 0, at(11));
  timeline.mark_ready(a, 1, 12, at(40));
  timeline.end(a, 1, at(41));
  timeline.stop();

  const json trace = parse_file(path);
  CHECK(trace.at("otherData").at("herd_timeline_version") == 2);
  REQUIRE(pids_by_name(trace) == std::map<std::string, int>{{a, 1}});
  CHECK(track_events(trace, 1, 1) ==
        std::vector<std::string>{"i:3", "B:NEGOTIATE_ALLREDUCE", "i:0", "i:12", "E"});
  std::vector<double> marks;
  for (const json& event : trace.at("traceEvents")) {
    if (event.at("ph") != "i") continue;
    CHECK(event.at("s") == "t");
    marks.push_back(event.at("ts").get<double>());
  }
  REQUIRE(marks.size() == 3);
  CHECK(marks[1] - marks[0] == Approx(6.0).margin(0.002));
  CHECK(marks[2] - marks[1] == Approx(29.0).margin(0.002));
}

}  // namespace herd::detail

TEST_CASE("rank file path: %r stands for the rank, a path without it is rank 0's", "[timeline]") {
  using herd::detail::rank_file_path;
  CHECK(rank_file_path("/tmp/t.%r.json", 0) == "/tmp/t.0.json");
  CHECK(rank_file_path("/tmp/%r/t.%r.json", 12) == "/tmp/12/t.12.json");
  CHECK(rank_file_path("/tmp/t.json", 0) == "/tmp/t.json");
  CHECK(rank_file_path("/tmp/t.json", 3).empty());
  CHECK(rank_file_path("%r%r", 7) == "77");
}
