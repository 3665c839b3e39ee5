// Config: defaults and every HERD_* setting's valid and invalid values, read
// from a map as the environment (config_reading.h), and the readers of the
// real environment.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/config.h"
#include "tests/unit/core/config_reading.h"

namespace herd::detail {

using namespace config_test;

TEST_CASE("config: an empty environment keeps every default", "[config]") {
  Config config;
  REQUIRE(read({}, &config).is_ok());
  CHECK(config.fusion_threshold_bytes == 4194304);
  CHECK(config.fusion_max_tensor_bytes == 262144);
  CHECK(config.cycle_time_ms == 100.0);
  CHECK(config.cache_capacity == 1024);
  CHECK(config.log_level == LogLevel::kWarning);
  CHECK(config.ring_segment_bytes == -1);
  CHECK(config.small_allreduce_bytes == -1);
  CHECK(config.stall_check_seconds == 60.0);
  CHECK(differing_fields(config, Config{}).empty());
}

TEST_CASE("config: unrelated variables are ignored", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_UNKNOWN", "x"}, {"PATH", "/bin"}}, &config).is_ok());
  CHECK(differing_fields(config, Config{}).empty());
}

TEST_CASE("config: HERD_FUSION_THRESHOLD", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_FUSION_THRESHOLD", "0"}}, &config).is_ok());
  CHECK(config.fusion_threshold_bytes == 0);
  REQUIRE(read({{"HERD_FUSION_THRESHOLD", "9223372036854775807"}}, &config).is_ok());
  CHECK(config.fusion_threshold_bytes == INT64_MAX);
  const std::string expected = "a non-negative integer (bytes)";
  for (const char* bad : {"abc", "", "-1", " 5", "5 ", "64M", "1e6", "1.5", "+5", "0x10",
                          "9223372036854775808", "99999999999999999999999"}) {
    check_rejected("HERD_FUSION_THRESHOLD", bad, expected);
  }
}

TEST_CASE("config: HERD_FUSION_MAX_TENSOR_BYTES", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_FUSION_MAX_TENSOR_BYTES", "0"}}, &config).is_ok());
  CHECK(config.fusion_max_tensor_bytes == 0);
  REQUIRE(read({{"HERD_FUSION_MAX_TENSOR_BYTES", "1048576"}}, &config).is_ok());
  CHECK(config.fusion_max_tensor_bytes == 1048576);
  for (const char* bad : {"-1", "abc", "", "1M", "1.5"}) {
    check_rejected("HERD_FUSION_MAX_TENSOR_BYTES", bad, "a non-negative integer (bytes)");
  }
}

TEST_CASE("config: HERD_CYCLE_TIME", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_CYCLE_TIME", "0"}}, &config).is_ok());
  CHECK(config.cycle_time_ms == 0.0);
  REQUIRE(read({{"HERD_CYCLE_TIME", "2.5"}}, &config).is_ok());
  CHECK(config.cycle_time_ms == 2.5);
  REQUIRE(read({{"HERD_CYCLE_TIME", "1e1"}}, &config).is_ok());
  CHECK(config.cycle_time_ms == 10.0);
  const std::string expected = "a non-negative number of milliseconds";
  for (const char* bad : {"-1", "-5", "abc", "", "1ms", " 1", "inf", "nan", "1e999", "1.2.3"}) {
    check_rejected("HERD_CYCLE_TIME", bad, expected);
  }
}

TEST_CASE("config: HERD_CACHE_CAPACITY", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_CACHE_CAPACITY", "0"}}, &config).is_ok());
  CHECK(config.cache_capacity == 0);
  REQUIRE(read({{"HERD_CACHE_CAPACITY", "1048576"}}, &config).is_ok());
  CHECK(config.cache_capacity == 1048576);
  const std::string expected = "a non-negative integer no larger than 1048576 (names)";
  for (const char* bad : {"1048577", "-1", "many", "", "10 "}) {
    check_rejected("HERD_CACHE_CAPACITY", bad, expected);
  }
}

TEST_CASE("config: HERD_LOG_LEVEL", "[config]") {
  const std::map<std::string, LogLevel> valid = {
      {"trace", LogLevel::kTrace},     {"debug", LogLevel::kDebug}, {"info", LogLevel::kInfo},
      {"warning", LogLevel::kWarning}, {"error", LogLevel::kError}, {"off", LogLevel::kOff},
      {"DEBUG", LogLevel::kDebug},     {"Info", LogLevel::kInfo},   {"OFF", LogLevel::kOff}};
  for (const auto& [text, level] : valid) {
    INFO(text);
    Config config;
    REQUIRE(read({{"HERD_LOG_LEVEL", text}}, &config).is_ok());
    CHECK(config.log_level == level);
  }
  const std::string expected = "one of trace, debug, info, warning, error, off";
  for (const char* bad : {"verbose", "", "warn ", "3"}) {
    check_rejected("HERD_LOG_LEVEL", bad, expected);
  }
}

TEST_CASE("config: HERD_RING_SEGMENT_BYTES", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_RING_SEGMENT_BYTES", "1"}}, &config).is_ok());
  CHECK(config.ring_segment_bytes == 1);
  REQUIRE(read({{"HERD_RING_SEGMENT_BYTES", "4096"}}, &config).is_ok());
  CHECK(config.ring_segment_bytes == 4096);
  REQUIRE(read({{"HERD_RING_SEGMENT_BYTES", "auto"}}, &config).is_ok());
  CHECK(config.ring_segment_bytes == -1);
  for (const char* bad : {"0", "-1", "-4096", "4k", "", "AUTO", " auto"}) {
    check_rejected("HERD_RING_SEGMENT_BYTES", bad, "auto or a positive integer (bytes)");
  }
}

namespace {

// A setting that takes "auto" (stored as -1, its default) or a byte count:
// 0, a number and auto read back, and the usual malformed values fail.
void check_auto_or_bytes(const std::string& variable, int64_t Config::*field,
                         const std::string& number) {
  INFO(variable);
  Config config;
  CHECK(config.*field == -1);
  REQUIRE(read({{variable, "0"}}, &config).is_ok());
  CHECK(config.*field == 0);
  REQUIRE(read({{variable, number}}, &config).is_ok());
  CHECK(config.*field == std::stoll(number));
  REQUIRE(read({{variable, "auto"}}, &config).is_ok());
  CHECK(config.*field == -1);
  for (const char* bad : {"-1", "4k", "", "AUTO", "Auto", " auto", "auto ", " 0"}) {
    check_rejected(variable, bad, "auto or a non-negative integer (bytes)");
  }
}

}  // namespace

TEST_CASE("config: HERD_SMALL_ALLREDUCE_BYTES", "[config]") {
  check_auto_or_bytes("HERD_SMALL_ALLREDUCE_BYTES", &Config::small_allreduce_bytes, "1024");
}

TEST_CASE("config: HERD_EAGER_PIECE_BYTES", "[config]") {
  check_auto_or_bytes("HERD_EAGER_PIECE_BYTES", &Config::eager_piece_bytes, "8064");
}

TEST_CASE("config: HERD_SHM_ALLREDUCE_BYTES", "[config]") {
  check_auto_or_bytes("HERD_SHM_ALLREDUCE_BYTES", &Config::shm_allreduce_bytes, "1073741824");
}

TEST_CASE("config: HERD_SHM_SINGLE_COPY is auto, on or off in any letter case", "[config]") {
  CHECK(Config{}.shm_single_copy == ShmSingleCopy::kAuto);
  const std::map<std::string, ShmSingleCopy> valid = {{"auto", ShmSingleCopy::kAuto},
                                                      {"on", ShmSingleCopy::kOn},
                                                      {"ON", ShmSingleCopy::kOn},
                                                      {"off", ShmSingleCopy::kOff},
                                                      {"Off", ShmSingleCopy::kOff}};
  for (const auto& [text, value] : valid) {
    INFO(text);
    Config config;
    REQUIRE(read({{"HERD_SHM_SINGLE_COPY", text}}, &config).is_ok());
    CHECK(config.shm_single_copy == value);
  }
  for (const char* text : {"", "1", "yes", "auto "}) {
    INFO(text);
    Config config;
    const Status status = read({{"HERD_SHM_SINGLE_COPY", text}}, &config);
    REQUIRE_FALSE(status.is_ok());
    CHECK_THAT(status.message(),
               Catch::Contains("HERD_SHM_SINGLE_COPY") && Catch::Contains("auto, on or off"));
  }
}

TEST_CASE("config: HERD_ALLREDUCE_ALGORITHM", "[config]") {
  Config config;
  for (const auto& [text, value] : std::vector<std::pair<std::string, AllreduceAlgorithmSetting>>{
           {"auto", AllreduceAlgorithmSetting::kAuto},
           {"shm", AllreduceAlgorithmSetting::kShm},
           {"RING", AllreduceAlgorithmSetting::kRing},
           {"Recursive_Doubling", AllreduceAlgorithmSetting::kRecursiveDoubling}}) {
    INFO(text);
    REQUIRE(read({{"HERD_ALLREDUCE_ALGORITHM", text}}, &config).is_ok());
    CHECK(config.allreduce_algorithm == value);
  }
  for (const std::string bad : {"rd", "recursive-doubling", "ring ", "mpi"}) {
    INFO(bad);
    const Status status = read({{"HERD_ALLREDUCE_ALGORITHM", bad}}, &config);
    CHECK(status.message() ==
          "HERD_ALLREDUCE_ALGORITHM='" + bad + "': expected auto, shm, ring or recursive_doubling");
  }
}

TEST_CASE("config: HERD_STALL_CHECK_TIME", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_STALL_CHECK_TIME", "0"}}, &config).is_ok());
  CHECK(config.stall_check_seconds == 0.0);
  REQUIRE(read({{"HERD_STALL_CHECK_TIME", "0.5"}}, &config).is_ok());
  CHECK(config.stall_check_seconds == 0.5);
  for (const char* bad : {"-1", "soon", "", "inf", "nan"}) {
    check_rejected("HERD_STALL_CHECK_TIME", bad, "a non-negative number of seconds");
  }
}

TEST_CASE("config: HERD_PROCESS_SETS", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_PROCESS_SETS", "0,2;1,3"}}, &config).is_ok());
  CHECK(config.process_sets == std::vector<std::vector<int>>{{0, 2}, {1, 3}});
  REQUIRE(read({{"HERD_PROCESS_SETS", "5"}}, &config).is_ok());
  CHECK(config.process_sets == std::vector<std::vector<int>>{{5}});
  REQUIRE(read({{"HERD_PROCESS_SETS", ""}}, &config).is_ok());
  CHECK(config.process_sets.empty());
  for (const char* bad : {"0,,1", "0;", ";1", "a,b", "-1,2", "0 ,1", "0;1;"}) {
    check_rejected("HERD_PROCESS_SETS", bad,
                   "rank lists like 0,2;1,3 (non-negative integers, ',' within a set, ';' between "
                   "sets)");
  }
}

TEST_CASE("config: HERD_NUM_SERVERS and its alias DMLC_NUM_SERVER", "[config]") {
  Config config;
  CHECK(config.num_servers == 0);
  REQUIRE(read({{"HERD_NUM_SERVERS", "2"}}, &config).is_ok());
  CHECK(config.num_servers == 2);
  REQUIRE(read({{"DMLC_NUM_SERVER", "3"}}, &config).is_ok());
  CHECK(config.num_servers == 3);
  // herd's own variable wins over the alias.
  REQUIRE(read({{"HERD_NUM_SERVERS", "1"}, {"DMLC_NUM_SERVER", "4"}}, &config).is_ok());
  CHECK(config.num_servers == 1);
  for (const char* bad : {"-1", "two", "", "1.5", "2147483648"}) {
    check_rejected("HERD_NUM_SERVERS", bad, "a non-negative integer (ranks)");
    check_rejected("DMLC_NUM_SERVER", bad, "a non-negative integer (ranks)");
  }
}

TEST_CASE("config: HERD_KVSTORE_BIGARRAY_BOUND and its alias", "[config]") {
  Config config;
  CHECK(config.kvstore_bigarray_bound == 1000000);
  REQUIRE(read({{"HERD_KVSTORE_BIGARRAY_BOUND", "1"}}, &config).is_ok());
  CHECK(config.kvstore_bigarray_bound == 1);
  REQUIRE(read({{"MXNET_KVSTORE_BIGARRAY_BOUND", "400"}}, &config).is_ok());
  CHECK(config.kvstore_bigarray_bound == 400);
  REQUIRE(
      read({{"HERD_KVSTORE_BIGARRAY_BOUND", "7"}, {"MXNET_KVSTORE_BIGARRAY_BOUND", "400"}}, &config)
          .is_ok());
  CHECK(config.kvstore_bigarray_bound == 7);
  for (const char* bad : {"0", "-5", "1e6", ""}) {
    check_rejected("HERD_KVSTORE_BIGARRAY_BOUND", bad, "a positive integer (elements)");
    check_rejected("MXNET_KVSTORE_BIGARRAY_BOUND", bad, "a positive integer (elements)");
  }
}

TEST_CASE("config: HERD_TIMELINE and HERD_TIMELINE_MARK_CYCLES", "[config]") {
  Config config;
  CHECK(config.timeline_path.empty());
  CHECK_FALSE(config.timeline_mark_cycles);
  REQUIRE(read({{"HERD_TIMELINE", "/tmp/t.%r.json"}, {"HERD_TIMELINE_MARK_CYCLES", "1"}}, &config)
              .is_ok());
  CHECK(config.timeline_path == "/tmp/t.%r.json");
  CHECK(config.timeline_mark_cycles);
  // DYNAMIC (upstream's word) opens no file at init, like an empty value.
  REQUIRE(
      read({{"HERD_TIMELINE", "DYNAMIC"}, {"HERD_TIMELINE_MARK_CYCLES", "0"}}, &config).is_ok());
  CHECK(config.timeline_path.empty());
  CHECK_FALSE(config.timeline_mark_cycles);
  // Only the exact word: a file may be called "dynamic".
  REQUIRE(read({{"HERD_TIMELINE", "dynamic"}}, &config).is_ok());
  CHECK(config.timeline_path == "dynamic");
  for (const char* bad : {"2", "true", "yes", "", " 1"}) {
    check_rejected("HERD_TIMELINE_MARK_CYCLES", bad, "0 or 1");
  }
}

TEST_CASE("config: HERD_ELASTIC_DIR", "[config]") {
  Config config;
  CHECK(config.elastic_dir == "herd-elastic");
  REQUIRE(read({{"HERD_ELASTIC_DIR", "/shared/job7"}}, &config).is_ok());
  CHECK(config.elastic_dir == "/shared/job7");
  check_rejected("HERD_ELASTIC_DIR", "", "a directory path");
}

TEST_CASE("config: HERD_STATS", "[config]") {
  Config config;
  CHECK_FALSE(config.print_stats);
  REQUIRE(read({{"HERD_STATS", "1"}}, &config).is_ok());
  CHECK(config.print_stats);
  REQUIRE(read({{"HERD_STATS", "0"}}, &config).is_ok());
  CHECK_FALSE(config.print_stats);
  for (const char* bad : {"2", "true", "on", "", " 1"}) check_rejected("HERD_STATS", bad, "0 or 1");
}

TEST_CASE("config: several bad values are reported together", "[config]") {
  Config config;
  Status status = read(
      {{"HERD_FUSION_THRESHOLD", "abc"}, {"HERD_CYCLE_TIME", "-5"}, {"HERD_CACHE_CAPACITY", "8"}},
      &config);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "HERD_FUSION_THRESHOLD='abc': expected a non-negative integer (bytes); "
        "HERD_CYCLE_TIME='-5': expected a non-negative number of milliseconds");
  CHECK(config.cache_capacity == 1024);  // nothing applied when anything failed
}

TEST_CASE("config: herd_variables_in_environment lists the HERD_* names set", "[config]") {
  const char* name = "HERD_TEST_LISTED_VARIABLE_5e2a";
  REQUIRE(setenv(name, "x=y", 1) == 0);
  REQUIRE(setenv("NOT_HERD_TEST_VARIABLE_5e2a", "1", 1) == 0);
  const std::vector<std::string> names = herd_variables_in_environment();
  unsetenv(name);
  unsetenv("NOT_HERD_TEST_VARIABLE_5e2a");
  CHECK(std::count(names.begin(), names.end(), name) == 1);
  for (const std::string& listed : names) CHECK(listed.rfind("HERD_", 0) == 0);
}

TEST_CASE("config: process_environment reads the real environment", "[config]") {
  EnvLookup env = process_environment();
  CHECK(env("HERD_TEST_SURELY_UNSET_VARIABLE_8c1f") == nullptr);
}

TEST_CASE("config: HERD_HIERARCHICAL_ALLREDUCE is auto, 1 or 0", "[config]") {
  CHECK(Config{}.hierarchical_allreduce == HierarchicalAllreduce::kAuto);
  const std::vector<std::pair<const char*, HierarchicalAllreduce>> values = {
      {"auto", HierarchicalAllreduce::kAuto},
      {"1", HierarchicalAllreduce::kOn},
      {"0", HierarchicalAllreduce::kOff}};
  for (const auto& [text, value] : values) {
    INFO(text);
    Config config;
    config.hierarchical_allreduce = value == HierarchicalAllreduce::kOn
                                        ? HierarchicalAllreduce::kOff
                                        : HierarchicalAllreduce::kOn;
    REQUIRE(read({{"HERD_HIERARCHICAL_ALLREDUCE", text}}, &config).is_ok());
    CHECK(config.hierarchical_allreduce == value);
  }
  // Spelled as documented only: no other case, no other switch words.
  for (const char* bad : {"AUTO", "Auto", "on", "off", "2", "-1", "", " 1", "true"}) {
    check_rejected("HERD_HIERARCHICAL_ALLREDUCE", bad, "auto, 0 or 1");
  }
}

TEST_CASE("config: HERD_HIERARCHICAL_ALLGATHER is auto, 1 or 0", "[config]") {
  CHECK(Config{}.hierarchical_allgather == HierarchicalAllgather::kAuto);
  const std::vector<std::pair<const char*, HierarchicalAllgather>> values = {
      {"auto", HierarchicalAllgather::kAuto},
      {"1", HierarchicalAllgather::kOn},
      {"0", HierarchicalAllgather::kOff}};
  for (const auto& [text, value] : values) {
    INFO(text);
    Config config;
    config.hierarchical_allgather = value == HierarchicalAllgather::kOn
                                        ? HierarchicalAllgather::kOff
                                        : HierarchicalAllgather::kOn;
    REQUIRE(read({{"HERD_HIERARCHICAL_ALLGATHER", text}}, &config).is_ok());
    CHECK(config.hierarchical_allgather == value);
    CHECK(config.hierarchical_allreduce == HierarchicalAllreduce::kAuto);
  }
  for (const char* bad : {"AUTO", "on", "off", "2", "-1", "", " 1", "true"}) {
    check_rejected("HERD_HIERARCHICAL_ALLGATHER", bad, "auto, 0 or 1");
  }
}

TEST_CASE("config: the GPU settings", "[config]") {
  Config config;
  REQUIRE(read({{"HERD_GPU_ALLREDUCE", "Mpi"},
                {"HERD_HIERARCHICAL_ALLREDUCE", "1"},
                {"HERD_NCCL_TIMEOUT", "0"},
                {"HERD_GPU_STAGING_BYTES", "65536"}},
               &config)
              .is_ok());
  CHECK(config.gpu_allreduce == GpuAllreduce::kMpi);
  CHECK(config.hierarchical_allreduce == HierarchicalAllreduce::kOn);
  CHECK(config.nccl_timeout_seconds == 0.0);
  CHECK(config.gpu_staging_bytes == 65536);
  REQUIRE(read({{"HERD_GPU_ALLREDUCE", "nccl"}}, &config).is_ok());
  CHECK(config.gpu_allreduce == GpuAllreduce::kNccl);

  Status status = read({{"HERD_GPU_ALLREDUCE", "gloo"},
                        {"HERD_HIERARCHICAL_ALLREDUCE", "yes"},
                        {"HERD_NCCL_TIMEOUT", "-1"},
                        {"HERD_GPU_STAGING_BYTES", "0"}},
                       &config);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "HERD_GPU_ALLREDUCE='gloo': expected NCCL or MPI; "
        "HERD_HIERARCHICAL_ALLREDUCE='yes': expected auto, 0 or 1; "
        "HERD_NCCL_TIMEOUT='-1': expected a non-negative number of seconds; "
        "HERD_GPU_STAGING_BYTES='0': expected a positive integer (bytes)");
}

}  // namespace herd::detail
