// herd::ProgressDisplay against the exact bytes it must write, read back from
// a temporary file, with the clock given by the test.
#include <chrono>
#include <cstdio>
#include <string>

#include <catch2/catch.hpp>

#include "herd/error.h"
#include "herd/train/progress.h"

namespace herd {
namespace {

using Clock = ProgressDisplay::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

// Everything written to `file` so far.
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[256];
  std::size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0) text.append(buffer, n);
  std::fseek(file, 0, SEEK_END);
  return text;
}

TEST_CASE("progress modes parse and choose a style", "[progress]") {
  CHECK(parse_progress_mode("auto") == ProgressMode::kAuto);
  CHECK(parse_progress_mode("always") == ProgressMode::kAlways);
  CHECK(parse_progress_mode("never") == ProgressMode::kNever);
  try {
    parse_progress_mode("sometimes");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::kInvalidArgument);
    CHECK(std::string(e.what()) == "progress mode 'sometimes': expected auto, always or never");
  }
  CHECK(progress_style(ProgressMode::kAuto, true) == ProgressStyle::kInPlace);
  CHECK(progress_style(ProgressMode::kAuto, false) == ProgressStyle::kLines);
  CHECK(progress_style(ProgressMode::kAlways, false) == ProgressStyle::kInPlace);
  CHECK(progress_style(ProgressMode::kAlways, true) == ProgressStyle::kInPlace);
  CHECK(progress_style(ProgressMode::kNever, true) == ProgressStyle::kOff);
  CHECK(progress_style(ProgressMode::kNever, false) == ProgressStyle::kOff);
}

TEST_CASE("a file is not a terminal", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  CHECK_FALSE(is_terminal(file));
  std::fclose(file);
}

TEST_CASE("lines: one per interval, none before the first interval", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const Clock::time_point t0{};
  {
    ProgressDisplay display(file, ProgressStyle::kLines, seconds(5), t0);
    CHECK_FALSE(display.due(t0 + milliseconds(4999)));
    display.show("a", t0 + milliseconds(4999));
    CHECK(display.due(t0 + seconds(5)));
    display.show("b", t0 + seconds(5));
    display.show("c", t0 + seconds(9));  // 4 s after b: skipped
    display.show("d", t0 + seconds(10));
    display.clear();  // nothing to erase in a log
    display.show("e", t0 + seconds(12));
  }
  CHECK(contents(file) == "b\nd\n");
  std::fclose(file);
}

TEST_CASE("in place: redrawn at most every 100 ms, erased at the end", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const Clock::time_point t0{};
  {
    ProgressDisplay display(file, ProgressStyle::kInPlace, seconds(5), t0);
    display.show("a", t0);                     // at once
    display.show("b", t0 + milliseconds(50));  // too soon
    display.show("c", t0 + milliseconds(100));
    display.clear();
    display.show("d", t0 + milliseconds(120));  // after a clear: at once
  }
  CHECK(contents(file) == "\ra\033[K\rc\033[K\r\033[K\rd\033[K\r\033[K");
  std::fclose(file);
}

TEST_CASE("off: writes nothing", "[progress]") {
  std::FILE* file = std::tmpfile();
  REQUIRE(file != nullptr);
  const Clock::time_point t0{};
  {
    ProgressDisplay display(file, ProgressStyle::kOff, seconds(5), t0);
    CHECK_FALSE(display.on());
    CHECK_FALSE(display.due(t0 + seconds(60)));
    display.show("a", t0 + seconds(60));
  }
  CHECK(contents(file).empty());
  std::fclose(file);
}

}  // namespace
}  // namespace herd
