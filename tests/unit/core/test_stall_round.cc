// The stall round's judgement (judge_stalls) and its messages: which names
// are missing on which ranks, when rank 0 warns or stops the set, the exact
// texts, and byte encodings that survive a round trip and refuse corruption.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/stall_round.h"

namespace herd::detail {
namespace {

PendingTensor pending(const std::string& name, int64_t waited_ms, bool warning_due = false,
                      bool shutdown_due = false, CollectiveType type = CollectiveType::kAllreduce) {
  PendingTensor tensor;
  tensor.name = name;
  tensor.type = type;
  tensor.waited_ms = waited_ms;
  tensor.warning_due = warning_due;
  tensor.shutdown_due = shutdown_due;
  return tensor;
}

const std::vector<int> kLabels = {10, 11, 12, 13};

const std::string kShutdownPrefix =
    "herd stopped: tensors waited longer than HERD_STALL_SHUTDOWN_TIME for ranks that did not "
    "submit them: ";
const std::string kWarningSuffix =
    "; a rank that never submits a tensor stalls every rank waiting for it";

}  // namespace

TEST_CASE("stall round: names held by every rank are not stalled", "[stall_round]") {
  // Both due, but on every rank: they complete in the next agreement.
  const StallVerdict verdict =
      judge_stalls({{pending("a", 70000, true, true)}, {pending("a", 1000)}, {pending("a", 5)}}, {},
                   {10, 11, 12});
  CHECK(verdict.action == StallAction::kNone);
  CHECK(verdict.text.empty());
  CHECK(verdict.names.empty());
  CHECK(judge_stalls({{}, {}}, {}, {10, 11}).action == StallAction::kNone);
}

TEST_CASE("stall round: a warning names, per missing rank, the due names and who waits",
          "[stall_round]") {
  // grad/fc1: ranks 0 and 2 (global 10, 12) for 61.0 s (the longer wait),
  // missing on 1 and 3. grad/fc2: rank 1 only, due there. grad/young:
  // missing on 3, not due anywhere, so not named. grad/fc0: due, but rank 3
  // has joined, and every other rank holds it.
  const std::vector<std::vector<PendingTensor>> by_rank = {
      {pending("grad/fc1", 60960, true), pending("grad/young", 100),
       pending("grad/fc0", 61000, true)},
      {pending("grad/fc2", 60049, true, false, CollectiveType::kBroadcast),
       pending("grad/young", 90), pending("grad/fc0", 10)},
      {pending("grad/fc1", 59000), pending("grad/young", 80), pending("grad/fc0", 10)},
      {}};
  StallVerdict verdict = judge_stalls(by_rank, {}, kLabels);
  CHECK(verdict.action == StallAction::kWarn);
  CHECK(verdict.text ==
        "stall: rank 10 has not submitted broadcast 'grad/fc2' (ranks [11] have waited 60.0 s); "
        "rank 11 has not submitted allreduce 'grad/fc1' (ranks [10, 12] have waited 61.0 s); "
        "rank 12 has not submitted broadcast 'grad/fc2' (ranks [11] have waited 60.0 s); "
        "rank 13 has not submitted allreduce 'grad/fc0' (ranks [10, 11, 12] have waited 61.0 s), "
        "allreduce 'grad/fc1' (ranks [10, 12] have waited 61.0 s), broadcast 'grad/fc2' (ranks "
        "[11] have waited 60.0 s)" +
            kWarningSuffix);
  CHECK(verdict.names == std::vector<std::string>{"grad/fc0", "grad/fc1", "grad/fc2"});

  // Rank 3 (global 13) has joined: it lacks nothing, and grad/fc0 is held
  // by every other rank.
  verdict = judge_stalls(by_rank, {3}, kLabels);
  CHECK(verdict.action == StallAction::kWarn);
  CHECK(verdict.text ==
        "stall: rank 10 has not submitted broadcast 'grad/fc2' (ranks [11] have waited 60.0 s); "
        "rank 11 has not submitted allreduce 'grad/fc1' (ranks [10, 12] have waited 61.0 s); "
        "rank 12 has not submitted broadcast 'grad/fc2' (ranks [11] have waited 60.0 s)" +
            kWarningSuffix);
  CHECK(verdict.names == std::vector<std::string>{"grad/fc1", "grad/fc2"});
}

TEST_CASE("stall round: a name past the shutdown time stops the set, naming every missing name",
          "[stall_round]") {
  // Rank 1 lacks a (due for shutdown on rank 0) and b (just submitted on
  // rank 0, not due); rank 0 lacks c. Every missing name is listed.
  const StallVerdict verdict = judge_stalls(
      {{pending("a", 300049, true, true), pending("b", 3)}, {pending("c", 1200)}}, {}, {10, 11});
  CHECK(verdict.action == StallAction::kShutdown);
  CHECK(verdict.text == kShutdownPrefix +
                            "rank 10 has not submitted allreduce 'c' (ranks [11] have waited 1.2 "
                            "s); rank 11 has not submitted allreduce 'a' (ranks [10] have waited "
                            "300.0 s), allreduce 'b' (ranks [10] have waited 0.0 s)");
  CHECK(verdict.names == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("stall round: a rank missing many names lists the first ten and a count",
          "[stall_round]") {
  std::vector<PendingTensor> mine;
  for (int k = 0; k < 13; ++k) mine.push_back(pending("t" + std::to_string(k + 10), 2000, true));
  const StallVerdict verdict = judge_stalls({mine, {}}, {}, {0, 1});
  CHECK(verdict.action == StallAction::kWarn);
  std::string expected = "stall: rank 1 has not submitted ";
  for (int k = 0; k < 10; ++k) {
    expected += "allreduce 't" + std::to_string(k + 10) + "' (ranks [0] have waited 2.0 s), ";
  }
  expected += "and 3 more" + kWarningSuffix;
  CHECK(verdict.text == expected);
  CHECK(verdict.names.size() == 13);
}

TEST_CASE("stall round: pending lists and verdicts survive encoding", "[stall_round]") {
  const std::vector<PendingTensor> list = {
      pending("x", 0), pending("grad/w", 123456789, true, false, CollectiveType::kAlltoall),
      pending("", 7, false, true, CollectiveType::kGroupedAllreduce)};
  std::vector<PendingTensor> decoded;
  REQUIRE(decode(encode(list), &decoded).is_ok());
  REQUIRE(decoded.size() == list.size());
  for (std::size_t i = 0; i < list.size(); ++i) {
    INFO("entry " << i);
    CHECK(decoded[i].name == list[i].name);
    CHECK(decoded[i].type == list[i].type);
    CHECK(decoded[i].waited_ms == list[i].waited_ms);
    CHECK(decoded[i].warning_due == list[i].warning_due);
    CHECK(decoded[i].shutdown_due == list[i].shutdown_due);
  }

  StallVerdict verdict;
  verdict.action = StallAction::kShutdown;
  verdict.text = "herd stopped: it";
  verdict.names = {"a", "b/c"};
  StallVerdict back;
  REQUIRE(decode(encode(verdict), &back).is_ok());
  CHECK(back.action == StallAction::kShutdown);
  CHECK(back.text == verdict.text);
  CHECK(back.names == verdict.names);
}

TEST_CASE("stall round: corrupt or truncated messages fail to decode", "[stall_round]") {
  std::vector<uint8_t> bytes = encode(std::vector<PendingTensor>{pending("abc", 5)});
  std::vector<PendingTensor> list;
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    INFO("cut at " << cut);
    const std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + cut);
    CHECK_FALSE(decode(truncated, &list).is_ok());
  }
  std::vector<uint8_t> longer = bytes;
  longer.push_back(0);
  CHECK(decode(longer, &list).message() == "corrupt pending tensor list: 1 trailing bytes");
  std::vector<uint8_t> bad_type = bytes;
  bad_type[1 + 4 + 4 + 3] = 200;  // kind, count, name length, "abc", then the collective
  CHECK(decode(bad_type, &list).message() ==
        "corrupt pending tensor list: collective 200 out of range");

  StallVerdict verdict;
  verdict.action = StallAction::kWarn;
  verdict.text = "t";
  std::vector<uint8_t> verdict_bytes = encode(verdict);
  StallVerdict back;
  verdict_bytes[1] = 9;
  CHECK(decode(verdict_bytes, &back).message() == "corrupt stall verdict: action 9 out of range");
  // A pending list is not a verdict.
  CHECK(decode(bytes, &back).message() == "corrupt stall verdict: kind byte 80");
}

}  // namespace herd::detail
