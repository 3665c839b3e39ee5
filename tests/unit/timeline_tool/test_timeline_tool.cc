// herd-timeline's library (tools/timeline): two ranks' files written here by
// hand, with known clock origins and submissions, merged onto one clock and
// reported on; the errors name the file.
#include <cstdio>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "tools/timeline/merge.h"
#include "tools/timeline/stragglers.h"
#include "tools/timeline/trace_files.h"

namespace herd::timeline_tool {
namespace {

using json = nlohmann::json;

// A rank's file: tensor "a" (pid 1) and "b" (pid 2) in process set 0, each
// submitted at the given times (microseconds from the file's start) and
// agreed 1 us after the last.
std::string rank_file(int rank, int64_t start, const std::vector<double>& a_submitted,
                      const std::vector<double>& b_submitted) {
  json events = json::array();
  events.push_back({{"name", "process_name"},
                    {"ph", "M"},
                    {"pid", 0},
                    {"args", {{"name", "herd rank " + std::to_string(rank)}}}});
  events.push_back(
      {{"name", "process_sort_index"}, {"ph", "M"}, {"pid", 0}, {"args", {{"sort_index", 0}}}});
  const auto add_tensor = [&](int pid, const std::string& name,
                              const std::vector<double>& submitted) {
    events.push_back(
        {{"name", "process_name"}, {"ph", "M"}, {"pid", pid}, {"args", {{"name", name}}}});
    events.push_back({{"name", "process_sort_index"},
                      {"ph", "M"},
                      {"pid", pid},
                      {"args", {{"sort_index", pid}}}});
    for (double at : submitted) {
      events.push_back(
          {{"name", "NEGOTIATE_ALLREDUCE"}, {"ph", "B"}, {"pid", pid}, {"tid", 0}, {"ts", at}});
      events.push_back({{"name", std::to_string(rank)},
                        {"ph", "i"},
                        {"s", "t"},
                        {"pid", pid},
                        {"tid", 0},
                        {"ts", at}});
      events.push_back({{"ph", "E"}, {"pid", pid}, {"tid", 0}, {"ts", at + 1}});
    }
  };
  add_tensor(1, "a", a_submitted);
  add_tensor(2, "b", b_submitted);
  return json{
      {"displayTimeUnit", "ms"},
      {"otherData",
       {{"herd_timeline_version", 2}, {"rank", rank}, {"start_time_since_epoch_in_micros", start}}},
      {"traceEvents", events}}
      .dump();
}

}  // namespace

TEST_CASE("timeline tool: merge puts every rank on the earliest start's clock", "[timeline_tool]") {
  // Rank 1's file started 2500 us after rank 0's.
  const std::vector<RankTrace> traces = {
      parse_rank_trace(rank_file(1, 1'000'002'500, {100}, {}), "r1.json"),
      parse_rank_trace(rank_file(0, 1'000'000'000, {2000}, {50}), "r0.json")};
  const json merged = merge_traces(traces);
  CHECK(merged.at("otherData").at("start_time_since_epoch_in_micros") == 1'000'000'000);
  CHECK(merged.at("otherData").at("ranks").size() == 2);
  // Largest pid 2: blocks of 3 pids; rank 1's pid 1 becomes 4.
  std::map<int64_t, std::string> names;
  std::vector<std::pair<int64_t, double>> begins;
  for (const json& event : merged.at("traceEvents")) {
    if (event.at("ph") == "M" && event.at("name") == "process_name") {
      names[event.at("pid").get<int64_t>()] = event.at("args").at("name");
    }
    if (event.at("ph") == "B") {
      begins.emplace_back(event.at("pid").get<int64_t>(), event.at("ts").get<double>());
    }
  }
  CHECK(names == std::map<int64_t, std::string>{{0, "herd rank 0"},
                                                {1, "rank 0: a"},
                                                {2, "rank 0: b"},
                                                {3, "herd rank 1"},
                                                {4, "rank 1: a"},
                                                {5, "rank 1: b"}});
  // Rank 1's submission of "a" at 100 us of its file is 2600 us of the merge.
  CHECK(begins == std::vector<std::pair<int64_t, double>>{{4, 2600.0}, {1, 2000.0}, {2, 50.0}});
}

TEST_CASE("timeline tool: the straggler report names the last rank and the waits",
          "[timeline_tool]") {
  // Rank 1 starts 1000 us later. "a": rank 0 submits at 0 and 10000 us,
  // rank 1 at 4000 and 7000 us of its clock (5000 and 8000 on rank 0's):
  // rank 1 is last first (rank 0 waits 5 ms), then rank 0 (rank 1 waits
  // 2 ms). "b": rank 1 submits 20 ms after rank 0, once; the third submission
  // of "a" on rank 0 has no partner and is left out.
  const std::vector<RankTrace> traces = {
      parse_rank_trace(rank_file(0, 5'000'000, {0, 10000, 30000}, {1000}), "r0.json"),
      parse_rank_trace(rank_file(1, 5'001'000, {4000, 7000}, {20000}), "r1.json")};
  const StragglerReport report = find_stragglers(traces);
  CHECK(report.ranks == std::vector<int>{0, 1});
  CHECK(report.occurrences == 3);
  CHECK(report.times_last == std::vector<int>{1, 2});
  REQUIRE(report.total_wait_ms.size() == 2);
  CHECK(report.total_wait_ms[0] == Approx(5.0 + 20.0));
  CHECK(report.total_wait_ms[1] == Approx(2.0));
  REQUIRE(report.tensors.size() == 2);
  CHECK(report.tensors[0].tensor == "b");  // 20 ms, the longest
  CHECK(report.tensors[0].occurrences == 1);
  CHECK(report.tensors[0].mean_wait_ms[0] == Approx(20.0));
  CHECK(report.tensors[0].mean_wait_ms[1] == Approx(0.0));
  CHECK(report.tensors[1].tensor == "a");
  CHECK(report.tensors[1].occurrences == 2);
  CHECK(report.tensors[1].mean_wait_ms[0] == Approx(2.5));
  CHECK(report.tensors[1].mean_wait_ms[1] == Approx(1.0));
  CHECK(report.tensors[1].times_last == std::vector<int>{1, 1});

  const std::string text = format_report(report, 0);
  CHECK(text.find("most often last: rank 1 (2 of 3)") != std::string::npos);
  CHECK(text.find("20.000") != std::string::npos);
  const std::string top_one = format_report(report, 1);
  CHECK(top_one.find("(1 of 2)") != std::string::npos);
}

TEST_CASE("timeline tool: files that are not whole timelines are refused by path",
          "[timeline_tool]") {
  const std::string unfinished = rank_file(0, 1, {0}, {}).substr(0, 80);
  CHECK_THROWS_WITH(parse_rank_trace(unfinished, "cut.json"),
                    Catch::Contains("cut.json is not valid JSON"));
  CHECK_THROWS_WITH(parse_rank_trace("{\"traceEvents\":[]}", "plain.json"),
                    Catch::Contains("plain.json is not a herd timeline"));
  CHECK_THROWS_WITH(read_rank_traces({"/nonexistent/t.0.json"}),
                    Catch::Contains("cannot read /nonexistent/t.0.json"));

  const std::string dir = "/tmp/herd_timeline_tool_test";
  const std::string first = dir + ".a.json";
  const std::string second = dir + ".b.json";
  std::ofstream(first) << rank_file(1, 1, {0}, {});
  std::ofstream(second) << rank_file(1, 2, {0}, {});
  CHECK_THROWS_WITH(read_rank_traces({first, second}),
                    Catch::Contains("are both the timeline of rank 1"));
  std::remove(first.c_str());
  std::remove(second.c_str());
}

}  // namespace herd::timeline_tool
