// Config: defaults, every setting's valid and invalid values, and that the
// documentation table covers every Config field. Uses a map as the
// environment, so no test touches the real one.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/config.h"

namespace herd::detail {
namespace {

using Env = std::map<std::string, std::string>;

EnvLookup lookup_in(const Env& env) {
  return [&env](const char* variable) -> const char* {
    auto it = env.find(variable);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

Status read(const Env& env, Config* config) { return read_config(lookup_in(env), config); }

// Names of the Config fields that differ between a and b.
std::set<std::string> differing_fields(const Config& a, const Config& b) {
  std::set<std::string> fields;
  if (a.fusion_threshold_bytes != b.fusion_threshold_bytes) fields.insert("fusion_threshold_bytes");
  if (a.fusion_max_tensor_bytes != b.fusion_max_tensor_bytes) {
    fields.insert("fusion_max_tensor_bytes");
  }
  if (a.cycle_time_ms != b.cycle_time_ms) fields.insert("cycle_time_ms");
  if (a.cache_capacity != b.cache_capacity) fields.insert("cache_capacity");
  if (a.log_level != b.log_level) fields.insert("log_level");
  if (a.ring_segment_bytes != b.ring_segment_bytes) fields.insert("ring_segment_bytes");
  if (a.small_allreduce_bytes != b.small_allreduce_bytes) fields.insert("small_allreduce_bytes");
  if (a.eager_piece_bytes != b.eager_piece_bytes) fields.insert("eager_piece_bytes");
  if (a.shm_allreduce_bytes != b.shm_allreduce_bytes) fields.insert("shm_allreduce_bytes");
  if (a.allreduce_algorithm != b.allreduce_algorithm) fields.insert("allreduce_algorithm");
  if (a.stall_check_seconds != b.stall_check_seconds) fields.insert("stall_check_seconds");
  if (a.stall_shutdown_seconds != b.stall_shutdown_seconds) {
    fields.insert("stall_shutdown_seconds");
  }
  if (a.collective_timeout_seconds != b.collective_timeout_seconds) {
    fields.insert("collective_timeout_seconds");
  }
  if (a.process_sets != b.process_sets) fields.insert("process_sets");
  if (a.shm_single_copy != b.shm_single_copy) fields.insert("shm_single_copy");
  if (a.gpu_allreduce != b.gpu_allreduce) fields.insert("gpu_allreduce");
  if (a.hierarchical_allreduce != b.hierarchical_allreduce) fields.insert("hierarchical_allreduce");
  if (a.hierarchical_allgather != b.hierarchical_allgather) fields.insert("hierarchical_allgather");
  if (a.nccl_timeout_seconds != b.nccl_timeout_seconds) fields.insert("nccl_timeout_seconds");
  if (a.gpu_staging_bytes != b.gpu_staging_bytes) fields.insert("gpu_staging_bytes");
  if (a.num_servers != b.num_servers) fields.insert("num_servers");
  if (a.kvstore_bigarray_bound != b.kvstore_bigarray_bound) {
    fields.insert("kvstore_bigarray_bound");
  }
  if (a.elastic_dir != b.elastic_dir) fields.insert("elastic_dir");
  if (a.timeline_path != b.timeline_path) fields.insert("timeline_path");
  if (a.timeline_mark_cycles != b.timeline_mark_cycles) fields.insert("timeline_mark_cycles");
  if (a.print_stats != b.print_stats) fields.insert("print_stats");
  if (a.autotune != b.autotune) fields.insert("autotune");
  if (a.autotune_log != b.autotune_log) fields.insert("autotune_log");
  if (a.autotune_warmup_samples != b.autotune_warmup_samples) {
    fields.insert("autotune_warmup_samples");
  }
  if (a.autotune_steps_per_sample != b.autotune_steps_per_sample) {
    fields.insert("autotune_steps_per_sample");
  }
  return fields;
}

const std::set<std::string> kAllFields = {"fusion_threshold_bytes",
                                          "fusion_max_tensor_bytes",
                                          "cycle_time_ms",
                                          "cache_capacity",
                                          "log_level",
                                          "ring_segment_bytes",
                                          "small_allreduce_bytes",
                                          "eager_piece_bytes",
                                          "shm_allreduce_bytes",
                                          "shm_single_copy",
                                          "allreduce_algorithm",
                                          "stall_check_seconds",
                                          "stall_shutdown_seconds",
                                          "collective_timeout_seconds",
                                          "process_sets",
                                          "gpu_allreduce",
                                          "hierarchical_allreduce",
                                          "hierarchical_allgather",
                                          "nccl_timeout_seconds",
                                          "gpu_staging_bytes",
                                          "num_servers",
                                          "kvstore_bigarray_bound",
                                          "elastic_dir",
                                          "timeline_path",
                                          "timeline_mark_cycles",
                                          "print_stats",
                                          "autotune",
                                          "autotune_log",
                                          "autotune_warmup_samples",
                                          "autotune_steps_per_sample"};

void check_rejected(const std::string& variable, const std::string& value,
                    const std::string& expected) {
  INFO(variable << "='" << value << "'");
  Config config;
  config.fusion_threshold_bytes = 12345;  // must survive a failed read
  Status status = read({{variable, value}}, &config);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == variable + "='" + value + "': expected " + expected);
  CHECK(config.fusion_threshold_bytes == 12345);
}

}  // namespace

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

namespace {

// read_config's result, the fields it changed and its notes.
struct Read {
  Status status;
  Config config;
  std::set<std::string> changed;
  ConfigNotes notes;
};

Read read_with_notes(const Env& env) {
  Read result{Status::ok(), Config{}, {}, {}};
  result.status = read_config(lookup_in(env), &result.config, &result.notes);
  result.changed = differing_fields(result.config, Config{});
  return result;
}

}  // namespace

TEST_CASE("config: each HOROVOD_* alias sets its setting in herd's units", "[config][horovod]") {
  {
    Read r = read_with_notes({{"HOROVOD_FUSION_THRESHOLD", "67108864"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"fusion_threshold_bytes"});
    CHECK(r.config.fusion_threshold_bytes == 64 * 1024 * 1024);  // bytes, as Horovod's
  }
  {
    Read r = read_with_notes({{"HOROVOD_CYCLE_TIME", "2.5"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"cycle_time_ms"});
    CHECK(r.config.cycle_time_ms == 2.5);  // milliseconds, as Horovod's
  }
  {
    Read r = read_with_notes({{"HOROVOD_CACHE_CAPACITY", "0"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"cache_capacity"});
    CHECK(r.config.cache_capacity == 0);
  }
  {
    Read r = read_with_notes({{"HOROVOD_STALL_CHECK_TIME_SECONDS", "30"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"stall_check_seconds"});
    CHECK(r.config.stall_check_seconds == 30.0);
  }
  {
    Read r = read_with_notes({{"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"stall_shutdown_seconds"});
    CHECK(r.config.stall_shutdown_seconds == 90.0);
  }
  {
    Read r = read_with_notes({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"hierarchical_allreduce"});
    CHECK(r.config.hierarchical_allreduce == HierarchicalAllreduce::kOn);
    r = read_with_notes({{"HOROVOD_HIERARCHICAL_ALLREDUCE", "0"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.config.hierarchical_allreduce == HierarchicalAllreduce::kOff);
  }
  {
    Read r = read_with_notes({{"HOROVOD_HIERARCHICAL_ALLGATHER", "1"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"hierarchical_allgather"});
    CHECK(r.config.hierarchical_allgather == HierarchicalAllgather::kOn);
    CHECK(r.notes.warnings.empty());
    r = read_with_notes({{"HOROVOD_HIERARCHICAL_ALLGATHER", "0"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.config.hierarchical_allgather == HierarchicalAllgather::kOff);
  }
  for (const char* variable : {"HOROVOD_GPU_ALLREDUCE", "HOROVOD_GPU_OPERATIONS"}) {
    INFO(variable);
    Read r = read_with_notes({{variable, "MPI"}});
    REQUIRE(r.status.is_ok());
    CHECK(r.changed == std::set<std::string>{"gpu_allreduce"});
    CHECK(r.config.gpu_allreduce == GpuAllreduce::kMpi);
    r = read_with_notes({{variable, "mpi"}, {"HERD_GPU_ALLREDUCE", "mpi"}});
    CHECK(r.config.gpu_allreduce == GpuAllreduce::kMpi);
    r = read_with_notes({{variable, "nccl"}, {"HERD_GPU_ALLREDUCE", "MPI"}});
    CHECK(r.config.gpu_allreduce == GpuAllreduce::kMpi);
  }
}

TEST_CASE("config: HOROVOD_LOG_LEVEL takes Horovod's levels, FATAL as error", "[config][horovod]") {
  const std::map<std::string, LogLevel> valid = {
      {"TRACE", LogLevel::kTrace},     {"DEBUG", LogLevel::kDebug}, {"INFO", LogLevel::kInfo},
      {"WARNING", LogLevel::kWarning}, {"ERROR", LogLevel::kError}, {"FATAL", LogLevel::kError},
      {"fatal", LogLevel::kError},     {"info", LogLevel::kInfo},   {"Debug", LogLevel::kDebug}};
  for (const auto& [text, level] : valid) {
    INFO(text);
    Read r = read_with_notes({{"HOROVOD_LOG_LEVEL", text}});
    REQUIRE(r.status.is_ok());
    CHECK(r.config.log_level == level);
    CHECK(r.changed.size() <= 1);  // WARNING is the default
  }
  const std::string expected = "one of trace, debug, info, warning, error, fatal";
  // off is herd's level, not Horovod's.
  for (const char* bad : {"off", "OFF", "verbose", "", "warn", "3", " INFO"}) {
    check_rejected("HOROVOD_LOG_LEVEL", bad, expected);
  }
}

TEST_CASE("config: HOROVOD_STALL_CHECK_DISABLE=1 turns the stall check and shutdown off",
          "[config][horovod]") {
  Read r = read_with_notes({{"HOROVOD_STALL_CHECK_DISABLE", "1"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.changed == std::set<std::string>{"stall_check_seconds", "stall_shutdown_seconds"});
  CHECK(r.config.stall_check_seconds == 0.0);
  CHECK(r.config.stall_shutdown_seconds == 0.0);
  CHECK(r.notes.choices.empty());

  // 0 leaves both alone, also to the times Horovod's own variables give.
  r = read_with_notes({{"HOROVOD_STALL_CHECK_DISABLE", "0"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.changed.empty());
  r = read_with_notes({{"HOROVOD_STALL_CHECK_DISABLE", "0"},
                       {"HOROVOD_STALL_CHECK_TIME_SECONDS", "30"},
                       {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.config.stall_check_seconds == 30.0);
  CHECK(r.config.stall_shutdown_seconds == 90.0);
  CHECK(r.notes.choices.empty());

  // Disabled wins over the times, as in Horovod, and herd says so.
  r = read_with_notes({{"HOROVOD_STALL_CHECK_DISABLE", "1"},
                       {"HOROVOD_STALL_CHECK_TIME_SECONDS", "30"},
                       {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "90"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.config.stall_check_seconds == 0.0);
  CHECK(r.config.stall_shutdown_seconds == 0.0);
  CHECK(r.notes.choices ==
        std::vector<std::string>{
            "HERD_STALL_CHECK_TIME: herd uses HOROVOD_STALL_CHECK_DISABLE='1' and ignores "
            "HOROVOD_STALL_CHECK_TIME_SECONDS='30'",
            "HERD_STALL_SHUTDOWN_TIME: herd uses HOROVOD_STALL_CHECK_DISABLE='1' and ignores "
            "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS='90'"});

  // herd's own variables win over the switch.
  r = read_with_notes({{"HOROVOD_STALL_CHECK_DISABLE", "1"}, {"HERD_STALL_CHECK_TIME", "5"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.config.stall_check_seconds == 5.0);
  CHECK(r.config.stall_shutdown_seconds == 0.0);

  // A bad value is one error, though the switch stands for two settings.
  for (const char* bad : {"yes", "2", "", "-1", "true"}) {
    check_rejected("HOROVOD_STALL_CHECK_DISABLE", bad, "0 or 1");
  }
}

TEST_CASE("config: the HERD_* variable wins over its HOROVOD_* alias, and herd says so",
          "[config][horovod]") {
  Read r = read_with_notes({{"HERD_FUSION_THRESHOLD", "0"},
                            {"HOROVOD_FUSION_THRESHOLD", "1048576"},
                            {"HERD_CYCLE_TIME", "5"},
                            {"HOROVOD_CYCLE_TIME", "5"},
                            {"HERD_LOG_LEVEL", "error"},
                            {"HOROVOD_LOG_LEVEL", "FATAL"},
                            {"HERD_CACHE_CAPACITY", "16"},
                            {"HOROVOD_CACHE_CAPACITY", "8"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.config.fusion_threshold_bytes == 0);
  CHECK(r.config.cycle_time_ms == 5.0);
  CHECK(r.config.log_level == LogLevel::kError);
  CHECK(r.config.cache_capacity == 16);
  // Equal values (FATAL is error) need no word; different ones are named.
  CHECK(r.notes.choices ==
        std::vector<std::string>{"HERD_FUSION_THRESHOLD: herd uses HERD_FUSION_THRESHOLD='0' and "
                                 "ignores HOROVOD_FUSION_THRESHOLD='1048576'",
                                 "HERD_CACHE_CAPACITY: herd uses HERD_CACHE_CAPACITY='16' and "
                                 "ignores HOROVOD_CACHE_CAPACITY='8'"});
  CHECK(r.notes.warnings.empty());

  // Of two aliases the collective's own wins over the one for all.
  r = read_with_notes({{"HOROVOD_GPU_ALLREDUCE", "NCCL"}, {"HOROVOD_GPU_OPERATIONS", "MPI"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.config.gpu_allreduce == GpuAllreduce::kNccl);
  CHECK(r.notes.choices ==
        std::vector<std::string>{"HERD_GPU_ALLREDUCE: herd uses HOROVOD_GPU_ALLREDUCE='NCCL' and "
                                 "ignores HOROVOD_GPU_OPERATIONS='MPI'"});

  // Every setting an alias stands for, HERD_* set to a value the alias does
  // not give: the HERD_* value is the one in effect.
  r = read_with_notes({{"HERD_STALL_SHUTDOWN_TIME", "7"},
                       {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "8"},
                       {"HERD_STALL_CHECK_TIME", "3"},
                       {"HOROVOD_STALL_CHECK_TIME_SECONDS", "4"},
                       {"HERD_HIERARCHICAL_ALLREDUCE", "0"},
                       {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"},
                       {"HERD_LOG_LEVEL", "debug"},
                       {"HOROVOD_LOG_LEVEL", "TRACE"},
                       {"HERD_NUM_SERVERS", "1"},
                       {"DMLC_NUM_SERVER", "2"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.config.stall_shutdown_seconds == 7.0);
  CHECK(r.config.stall_check_seconds == 3.0);
  CHECK(r.config.hierarchical_allreduce == HierarchicalAllreduce::kOff);
  CHECK(r.config.log_level == LogLevel::kDebug);
  CHECK(r.config.num_servers == 1);
  CHECK(r.notes.choices.size() == 5);
}

TEST_CASE("config: a bad HOROVOD_* value fails like herd's own, naming the alias",
          "[config][horovod]") {
  for (const char* bad : {"abc", "", "-1", "64M", "1.5", "9223372036854775808"}) {
    check_rejected("HOROVOD_FUSION_THRESHOLD", bad, "a non-negative integer (bytes)");
  }
  for (const char* bad : {"-1", "abc", "1ms", "inf", "nan"}) {
    check_rejected("HOROVOD_CYCLE_TIME", bad, "a non-negative number of milliseconds");
  }
  for (const char* bad : {"1048577", "-1", "many"}) {
    check_rejected("HOROVOD_CACHE_CAPACITY", bad,
                   "a non-negative integer no larger than 1048576 (names)");
  }
  for (const char* variable :
       {"HOROVOD_STALL_CHECK_TIME_SECONDS", "HOROVOD_STALL_SHUTDOWN_TIME_SECONDS"}) {
    for (const char* bad : {"-5", "soon", "", "inf"}) {
      check_rejected(variable, bad, "a non-negative number of seconds");
    }
  }
  for (const char* variable : {"HOROVOD_GPU_ALLREDUCE", "HOROVOD_GPU_OPERATIONS"}) {
    for (const char* bad : {"DDL", "gloo", "", "NCCL "})
      check_rejected(variable, bad, "NCCL or MPI");
  }
  // Horovod's switch: herd's "auto" is not among its values.
  for (const char* bad : {"2", "yes", "true", "", "auto"}) {
    check_rejected("HOROVOD_HIERARCHICAL_ALLREDUCE", bad, "0 or 1");
    check_rejected("HOROVOD_HIERARCHICAL_ALLGATHER", bad, "0 or 1");
  }

  // Checked though the HERD_* variable is set and wins; reported with the
  // other bad values, and nothing is applied.
  Config config;
  Status status = read_config(lookup_in({{"HERD_FUSION_THRESHOLD", "0"},
                                         {"HOROVOD_FUSION_THRESHOLD", "abc"},
                                         {"HOROVOD_CYCLE_TIME", "-5"},
                                         {"HERD_CACHE_CAPACITY", "8"}}),
                              &config);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() ==
        "HOROVOD_FUSION_THRESHOLD='abc': expected a non-negative integer (bytes); "
        "HOROVOD_CYCLE_TIME='-5': expected a non-negative number of milliseconds");
  CHECK(differing_fields(config, Config{}).empty());
}

TEST_CASE("config: HOROVOD_* variables without an effect on herd change nothing",
          "[config][horovod]") {
  // Unset aliases, the launcher's plumbing, switches herd always has on
  // (dynamic process sets), a timeline started later through the API,
  // Horovod's build settings, values that ask for what herd does anyway and
  // names programs use for their own ends: no setting changes, no word.
  Read r = read_with_notes({{"HOROVOD_DYNAMIC_PROCESS_SETS", "1"},
                            {"HOROVOD_TIMELINE", "DYNAMIC"},
                            {"HOROVOD_LOCAL_RANK", "0"},
                            {"HOROVOD_LOCAL_SIZE", "2"},
                            {"HOROVOD_CROSS_RANK", "0"},
                            {"HOROVOD_CROSS_SIZE", "1"},
                            {"HOROVOD_HOSTNAME", "node1"},
                            {"HOROVOD_GLOO_RENDEZVOUS_ADDR", "10.0.0.1"},
                            {"HOROVOD_GLOO_RENDEZVOUS_PORT", "4000"},
                            {"HOROVOD_SECRET_KEY", "c2VjcmV0"},
                            {"HOROVOD_START_TIMEOUT", "30"},
                            {"HOROVOD_ENABLE_ASYNC_COMPLETION", "1"},
                            {"HOROVOD_WITH_PYTORCH", "1"},
                            {"HOROVOD_NCCL_HOME", "/usr/local/nccl"},
                            {"HOROVOD_TEST_GPU", "1"},
                            {"HOROVOD_MIXED_INSTALL", "0"},
                            {"HOROVOD_AUTOTUNE", "0"},
                            {"HOROVOD_CONTROLLER", "MPI"},
                            {"HOROVOD_CPU_OPERATIONS", "mpi"},
                            {"HOROVOD_MPI_THREADS_DISABLE", "0"},
                            {"HOROVOD_LOG_HIDE_TIME", "1"},
                            {"HOROVOD_NUM_NCCL_STREAMS", "1"},
                            {"HOROVOD_ELASTIC", "0"},
                            {"HOROVOD_GPU_BROADCAST", "nccl"},
                            {"HOROVOD_STALL_CHECK_DISABLE", "0"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.changed.empty());
  CHECK(r.notes.warnings.empty());
  CHECK(r.notes.choices.empty());
}

TEST_CASE("config: HOROVOD_* variables herd cannot honour are named with the reason",
          "[config][horovod]") {
  Read r = read_with_notes({{"HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES", "20"},
                            {"HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE", "0.8"},
                            {"HOROVOD_CONTROLLER", "gloo"},
                            {"HOROVOD_CPU_OPERATIONS", "ccl"},
                            {"HOROVOD_MPI_THREADS_DISABLE", "1"},
                            {"HOROVOD_RANK", "3"},
                            {"HOROVOD_GPU_ALLGATHER", "MPI"},
                            {"HOROVOD_GPU_BROADCAST", "NCCL"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.changed.empty());
  CHECK(r.notes.warnings ==
        std::vector<std::string>{
            "HOROVOD_AUTOTUNE_BAYES_OPT_MAX_SAMPLES='20' is ignored: herd's autotuning searches "
            "by coordinate descent, not Bayesian optimisation; HERD_AUTOTUNE_STEPS_PER_SAMPLE "
            "sets how long each sample is",
            "HOROVOD_AUTOTUNE_GAUSSIAN_PROCESS_NOISE='0.8' is ignored: herd's autotuning "
            "searches by coordinate descent, not Bayesian optimisation; "
            "HERD_AUTOTUNE_STEPS_PER_SAMPLE sets how long each sample is",
            "HOROVOD_CONTROLLER='gloo' is ignored: herd's ranks coordinate over MPI only; it has "
            "no Gloo",
            "HOROVOD_CPU_OPERATIONS='ccl' is ignored: herd runs CPU collectives over MPI and "
            "shared memory only; it has neither Gloo nor oneCCL",
            "HOROVOD_RANK='3' is ignored: herd takes the ranks from MPI; processes started "
            "without MPI (horovodrun --gloo, Ray, Spark) are jobs of one rank each: start the "
            "job with mpirun",
            "HOROVOD_MPI_THREADS_DISABLE='1' is ignored: herd's background thread needs "
            "MPI_THREAD_MULTIPLE",
            "HOROVOD_GPU_ALLGATHER='MPI' is ignored: herd runs every GPU collective the one way "
            "HERD_GPU_ALLREDUCE picks, here NCCL"});

  // A per-collective choice that matches herd's one choice is honoured.
  r = read_with_notes({{"HOROVOD_GPU_OPERATIONS", "MPI"},
                       {"HOROVOD_GPU_ALLGATHER", "mpi"},
                       {"HOROVOD_GPU_ALLTOALL", "NCCL"}});
  REQUIRE(r.status.is_ok());
  CHECK(r.notes.warnings ==
        std::vector<std::string>{"HOROVOD_GPU_ALLTOALL='NCCL' is ignored: herd runs every GPU "
                                 "collective the one way HERD_GPU_ALLREDUCE picks, here MPI"});

  // Every one of them warns about a value herd does not have, once.
  for (const std::string& variable : unhonoured_horovod_variables()) {
    INFO(variable);
    CHECK(variable.rfind("HOROVOD_", 0) == 0);
    r = read_with_notes({{variable, "7"}});
    REQUIRE(r.status.is_ok());
    REQUIRE(r.notes.warnings.size() == 1);
    CHECK(r.notes.warnings[0].rfind(variable + "='7' is ignored: ", 0) == 0);
  }

  // Warned about also when another variable fails the read.
  r = read_with_notes({{"HOROVOD_CONTROLLER", "gloo"}, {"HOROVOD_FUSION_THRESHOLD", "abc"}});
  CHECK_FALSE(r.status.is_ok());
  CHECK(r.notes.warnings.size() == 1);
}

TEST_CASE("config: the aliases and the settings they stand for", "[config][horovod]") {
  // Written out by hand: the mapping docs/configuration.md documents.
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"DMLC_NUM_SERVER", "HERD_NUM_SERVERS"},
      {"MXNET_KVSTORE_BIGARRAY_BOUND", "HERD_KVSTORE_BIGARRAY_BOUND"},
      {"HOROVOD_FUSION_THRESHOLD", "HERD_FUSION_THRESHOLD"},
      {"HOROVOD_CYCLE_TIME", "HERD_CYCLE_TIME"},
      {"HOROVOD_CACHE_CAPACITY", "HERD_CACHE_CAPACITY"},
      {"HOROVOD_LOG_LEVEL", "HERD_LOG_LEVEL"},
      {"HOROVOD_STALL_CHECK_DISABLE", "HERD_STALL_CHECK_TIME"},
      {"HOROVOD_STALL_CHECK_TIME_SECONDS", "HERD_STALL_CHECK_TIME"},
      {"HOROVOD_STALL_CHECK_DISABLE", "HERD_STALL_SHUTDOWN_TIME"},
      {"HOROVOD_STALL_SHUTDOWN_TIME_SECONDS", "HERD_STALL_SHUTDOWN_TIME"},
      {"HOROVOD_GPU_ALLREDUCE", "HERD_GPU_ALLREDUCE"},
      {"HOROVOD_GPU_OPERATIONS", "HERD_GPU_ALLREDUCE"},
      {"HOROVOD_HIERARCHICAL_ALLREDUCE", "HERD_HIERARCHICAL_ALLREDUCE"},
      {"HOROVOD_HIERARCHICAL_ALLGATHER", "HERD_HIERARCHICAL_ALLGATHER"},
      {"HOROVOD_TIMELINE", "HERD_TIMELINE"},
      {"HOROVOD_TIMELINE_MARK_CYCLES", "HERD_TIMELINE_MARK_CYCLES"},
      {"HOROVOD_AUTOTUNE", "HERD_AUTOTUNE"},
      {"HOROVOD_AUTOTUNE_LOG", "HERD_AUTOTUNE_LOG"},
      {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "HERD_AUTOTUNE_WARMUP_SAMPLES"},
      {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "HERD_AUTOTUNE_STEPS_PER_SAMPLE"}};
  std::vector<std::pair<std::string, std::string>> listed;
  for (const AliasDoc& alias : alias_docs()) listed.emplace_back(alias.variable, alias.setting);
  CHECK(listed == expected);
  // No variable is both an alias and warned about.
  for (const std::string& variable : unhonoured_horovod_variables()) {
    for (const AliasDoc& alias : alias_docs()) CHECK(alias.variable != variable);
  }
}

TEST_CASE("config: an alias of a setting compared across ranks is compared as the setting",
          "[config][horovod]") {
  Config config;
  REQUIRE(read_config(lookup_in({{"HOROVOD_FUSION_THRESHOLD", "11"},
                                 {"HOROVOD_CACHE_CAPACITY", "13"},
                                 {"HOROVOD_GPU_OPERATIONS", "MPI"},
                                 {"HOROVOD_HIERARCHICAL_ALLREDUCE", "1"}}),
                      &config)
              .is_ok());
  std::map<std::string, int64_t> values;
  for (const AgreedSetting& setting : settings_that_must_agree(config)) {
    values[setting.variable] = setting.value;
  }
  CHECK(values.at("HERD_FUSION_THRESHOLD") == 11);
  CHECK(values.at("HERD_CACHE_CAPACITY") == 13);
  CHECK(values.at("HERD_GPU_ALLREDUCE") == static_cast<int64_t>(GpuAllreduce::kMpi));
  CHECK(values.at("HERD_HIERARCHICAL_ALLREDUCE") == 1);
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

TEST_CASE("config: HERD_AUTOTUNE and its Horovod names", "[config][horovod]") {
  Config config;
  CHECK_FALSE(config.autotune);
  CHECK(config.autotune_log.empty());
  CHECK(config.autotune_warmup_samples == 3);
  CHECK(config.autotune_steps_per_sample == 10);
  REQUIRE(read({{"HOROVOD_AUTOTUNE", "1"},
                {"HOROVOD_AUTOTUNE_LOG", "/tmp/trials.csv"},
                {"HOROVOD_AUTOTUNE_WARMUP_SAMPLES", "0"},
                {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "4"}},
               &config)
              .is_ok());
  CHECK(config.autotune);
  CHECK(config.autotune_log == "/tmp/trials.csv");
  CHECK(config.autotune_warmup_samples == 0);
  CHECK(config.autotune_steps_per_sample == 4);
  // herd's own variables win, and Horovod's names draw no warning now.
  Read r = read_with_notes({{"HERD_AUTOTUNE", "0"},
                            {"HOROVOD_AUTOTUNE", "1"},
                            {"HERD_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                            {"HOROVOD_AUTOTUNE_STEPS_PER_SAMPLE", "4"}});
  REQUIRE(r.status.is_ok());
  CHECK_FALSE(r.config.autotune);
  CHECK(r.config.autotune_steps_per_sample == 2);
  CHECK(r.notes.warnings.empty());
  for (const char* bad : {"2", "true", "", " 1"}) {
    check_rejected("HERD_AUTOTUNE", bad, "0 or 1");
    check_rejected("HOROVOD_AUTOTUNE", bad, "0 or 1");
  }
  for (const char* bad : {"0", "-1", "1.5", "x"}) {
    check_rejected("HERD_AUTOTUNE_STEPS_PER_SAMPLE", bad, "a positive integer (steps)");
  }
  for (const char* bad : {"-1", "1.5", ""}) {
    check_rejected("HERD_AUTOTUNE_WARMUP_SAMPLES", bad, "a non-negative integer (samples)");
  }
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

TEST_CASE("config: setting_docs covers every field exactly once", "[config]") {
  const std::map<std::string, std::string> non_default = {{"HERD_FUSION_THRESHOLD", "1"},
                                                          {"HERD_CYCLE_TIME", "0.25"},
                                                          {"HERD_CACHE_CAPACITY", "7"},
                                                          {"HERD_LOG_LEVEL", "trace"},
                                                          {"HERD_RING_SEGMENT_BYTES", "3"},
                                                          {"HERD_SMALL_ALLREDUCE_BYTES", "5"},
                                                          {"HERD_STALL_CHECK_TIME", "2.5"},
                                                          {"HERD_PROCESS_SETS", "0,1"},
                                                          {"HERD_FUSION_MAX_TENSOR_BYTES", "9"},
                                                          {"HERD_GPU_ALLREDUCE", "mpi"},
                                                          {"HERD_HIERARCHICAL_ALLREDUCE", "1"},
                                                          {"HERD_HIERARCHICAL_ALLGATHER", "1"},
                                                          {"HERD_NCCL_TIMEOUT", "1.5"},
                                                          {"HERD_GPU_STAGING_BYTES", "4096"},
                                                          {"HERD_EAGER_PIECE_BYTES", "0"},
                                                          {"HERD_SHM_ALLREDUCE_BYTES", "0"},
                                                          {"HERD_STALL_SHUTDOWN_TIME", "7.5"},
                                                          {"HERD_SHM_SINGLE_COPY", "off"},
                                                          {"HERD_ALLREDUCE_ALGORITHM", "ring"},
                                                          {"HERD_COLLECTIVE_TIMEOUT", "4"},
                                                          {"HERD_NUM_SERVERS", "2"},
                                                          {"HERD_KVSTORE_BIGARRAY_BOUND", "10"},
                                                          {"HERD_TIMELINE", "/tmp/timeline.json"},
                                                          {"HERD_TIMELINE_MARK_CYCLES", "1"},
                                                          {"HERD_AUTOTUNE", "1"},
                                                          {"HERD_AUTOTUNE_LOG", "/tmp/a.csv"},
                                                          {"HERD_AUTOTUNE_WARMUP_SAMPLES", "0"},
                                                          {"HERD_AUTOTUNE_STEPS_PER_SAMPLE", "2"},
                                                          {"HERD_ELASTIC_DIR", "/tmp/state"},
                                                          {"HERD_STATS", "1"}};
  std::vector<SettingDoc> docs = setting_docs();
  REQUIRE(docs.size() == non_default.size());

  std::set<std::string> variables;
  std::set<std::string> covered;
  for (const SettingDoc& doc : docs) {
    INFO(doc.variable);
    CHECK(doc.variable.rfind("HERD_", 0) == 0);
    CHECK_FALSE(doc.description.empty());
    CHECK(variables.insert(doc.variable).second);

    // The documented default is the Config default.
    Config from_default;
    REQUIRE(read({{doc.variable, doc.default_value}}, &from_default).is_ok());
    CHECK(differing_fields(from_default, Config{}).empty());

    // Each variable sets exactly one field, and no two share one.
    REQUIRE(non_default.count(doc.variable) == 1);
    Config changed;
    REQUIRE(read({{doc.variable, non_default.at(doc.variable)}}, &changed).is_ok());
    std::set<std::string> fields = differing_fields(changed, Config{});
    REQUIRE(fields.size() == 1);
    CHECK(covered.insert(*fields.begin()).second);
  }
  CHECK(covered == kAllFields);
}

TEST_CASE("config: the settings compared across ranks", "[config]") {
  // Those that decide message layouts, fusion groups or the algorithm.
  const std::vector<std::string> compared = {
      "HERD_FUSION_THRESHOLD",       "HERD_FUSION_MAX_TENSOR_BYTES", "HERD_CACHE_CAPACITY",
      "HERD_RING_SEGMENT_BYTES",     "HERD_SMALL_ALLREDUCE_BYTES",   "HERD_SHM_ALLREDUCE_BYTES",
      "HERD_ALLREDUCE_ALGORITHM",    "HERD_GPU_ALLREDUCE",           "HERD_HIERARCHICAL_ALLREDUCE",
      "HERD_HIERARCHICAL_ALLGATHER", "HERD_GPU_STAGING_BYTES",       "HERD_NUM_SERVERS",
      "HERD_KVSTORE_BIGARRAY_BOUND"};
  std::vector<std::string> marked;
  for (const SettingDoc& doc : setting_docs()) {
    if (doc.compared_across_ranks) marked.push_back(doc.variable);
  }
  CHECK(marked == compared);

  Config config;
  REQUIRE(read({{"HERD_FUSION_THRESHOLD", "11"},
                {"HERD_FUSION_MAX_TENSOR_BYTES", "12"},
                {"HERD_CACHE_CAPACITY", "13"},
                {"HERD_RING_SEGMENT_BYTES", "14"},
                {"HERD_SMALL_ALLREDUCE_BYTES", "auto"},
                {"HERD_SHM_ALLREDUCE_BYTES", "16"},
                {"HERD_ALLREDUCE_ALGORITHM", "recursive_doubling"},
                {"HERD_GPU_ALLREDUCE", "MPI"},
                {"HERD_HIERARCHICAL_ALLREDUCE", "1"},
                {"HERD_HIERARCHICAL_ALLGATHER", "0"},
                {"HERD_GPU_STAGING_BYTES", "19"},
                {"HERD_NUM_SERVERS", "20"},
                {"HERD_KVSTORE_BIGARRAY_BOUND", "21"}},
               &config)
              .is_ok());
  const std::vector<int64_t> values = {11, 12, 13, 14, -1, 16, 3, 1, 1, 0, 19, 20, 21};
  static_assert(static_cast<int64_t>(HierarchicalAllreduce::kOn) == 1);
  const std::vector<AgreedSetting> agreed = settings_that_must_agree(config);
  REQUIRE(agreed.size() == compared.size());
  for (std::size_t i = 0; i < agreed.size(); ++i) {
    INFO(compared[i]);
    CHECK(std::string(agreed[i].variable) == compared[i]);
    CHECK(agreed[i].value == values[i]);
  }
  config.gpu_allreduce = GpuAllreduce::kNccl;
  config.hierarchical_allreduce = HierarchicalAllreduce::kOff;
  CHECK(settings_that_must_agree(config)[7].value == 0);
  CHECK(settings_that_must_agree(config)[8].value == 0);
  config.hierarchical_allreduce = HierarchicalAllreduce::kAuto;
  CHECK(settings_that_must_agree(config)[8].value == 2);
  CHECK(settings_that_must_agree(config)[8].text(2) == "auto");
}

TEST_CASE("config: compared values print as the variables spell them", "[config]") {
  // The texts in "differs across ranks" messages: auto, not its -1.
  std::map<std::string, std::vector<std::pair<int64_t, std::string>>> expected = {
      {"HERD_FUSION_THRESHOLD", {{0, "0"}, {4194304, "4194304"}}},
      {"HERD_FUSION_MAX_TENSOR_BYTES", {{262144, "262144"}}},
      {"HERD_CACHE_CAPACITY", {{1024, "1024"}}},
      {"HERD_RING_SEGMENT_BYTES", {{-1, "auto"}, {1, "1"}}},
      {"HERD_SMALL_ALLREDUCE_BYTES", {{-1, "auto"}, {0, "0"}, {65536, "65536"}}},
      {"HERD_SHM_ALLREDUCE_BYTES", {{-1, "auto"}, {4096, "4096"}}},
      {"HERD_ALLREDUCE_ALGORITHM",
       {{static_cast<int64_t>(AllreduceAlgorithmSetting::kAuto), "auto"},
        {static_cast<int64_t>(AllreduceAlgorithmSetting::kShm), "shm"},
        {static_cast<int64_t>(AllreduceAlgorithmSetting::kRing), "ring"},
        {static_cast<int64_t>(AllreduceAlgorithmSetting::kRecursiveDoubling),
         "recursive_doubling"}}},
      {"HERD_GPU_ALLREDUCE",
       {{static_cast<int64_t>(GpuAllreduce::kNccl), "NCCL"},
        {static_cast<int64_t>(GpuAllreduce::kMpi), "MPI"}}},
      {"HERD_HIERARCHICAL_ALLREDUCE",
       {{static_cast<int64_t>(HierarchicalAllreduce::kOff), "0"},
        {static_cast<int64_t>(HierarchicalAllreduce::kOn), "1"},
        {static_cast<int64_t>(HierarchicalAllreduce::kAuto), "auto"}}},
      {"HERD_HIERARCHICAL_ALLGATHER",
       {{static_cast<int64_t>(HierarchicalAllgather::kOff), "0"},
        {static_cast<int64_t>(HierarchicalAllgather::kOn), "1"},
        {static_cast<int64_t>(HierarchicalAllgather::kAuto), "auto"}}},
      {"HERD_GPU_STAGING_BYTES", {{4194304, "4194304"}}},
      {"HERD_NUM_SERVERS", {{0, "0"}, {2, "2"}}},
      {"HERD_KVSTORE_BIGARRAY_BOUND", {{1000000, "1000000"}}},
  };
  const std::vector<AgreedSetting> agreed = settings_that_must_agree(Config{});
  REQUIRE(agreed.size() == expected.size());
  for (const AgreedSetting& setting : agreed) {
    INFO(setting.variable);
    REQUIRE(expected.count(setting.variable) == 1);
    for (const auto& [value, text] : expected[setting.variable]) {
      CHECK(setting.text(value) == text);
    }
  }
}

TEST_CASE("config: unknown HERD_* variables are named with the closest known one", "[config]") {
  CHECK(unknown_variable_warnings({}).empty());
  // Settings and the variables of herd's scripts and herd-train are known.
  CHECK(unknown_variable_warnings({"HERD_FUSION_THRESHOLD", "HERD_LOG_LEVEL", "HERD_BUILD_DIR",
                                   "HERD_TRAIN_RANKS", "HERD_DEMO_RANKS", "HERD_EPOCHS",
                                   "HERD_BATCH_SIZE", "HERD_LR_STEP_GAMMA", "HERD_CHECK_JOBS",
                                   "HERD_CMAKE_ARGS", "HERD_GRADIENT_COMPRESSION", "HERD_SLOW_RANK",
                                   "HERD_COMMIT_EVERY", "HERD_KILL_RANK", "HERD_KILL_AT_STEP"})
            .empty());
  CHECK(unknown_variable_warnings({"HERD_FUSION_THRESOLD", "HERD_LOGLEVEL", "HERD_TRAIN_RANK",
                                   "HERD_CYCLE_TIMES", "HERD_SHM_ALLREDUCE_BYTE"}) ==
        std::vector<std::string>{
            "HERD_FUSION_THRESOLD is not a herd setting and is ignored; did you mean "
            "HERD_FUSION_THRESHOLD?",
            "HERD_LOGLEVEL is not a herd setting and is ignored; did you mean HERD_LOG_LEVEL?",
            "HERD_TRAIN_RANK is not a herd setting and is ignored; did you mean "
            "HERD_TRAIN_RANKS?",
            "HERD_CYCLE_TIMES is not a herd setting and is ignored; did you mean "
            "HERD_CYCLE_TIME?",
            "HERD_SHM_ALLREDUCE_BYTE is not a herd setting and is ignored; did you mean "
            "HERD_SHM_ALLREDUCE_BYTES?"});
  // Equally close to two: the settings' table order decides (SMALL before SHM).
  CHECK(unknown_variable_warnings({"HERD_SHAL_ALLREDUCE_BYTES"}) ==
        std::vector<std::string>{"HERD_SHAL_ALLREDUCE_BYTES is not a herd setting and is ignored; "
                                 "did you mean HERD_SMALL_ALLREDUCE_BYTES?"});
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
