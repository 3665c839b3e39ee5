// Config: the variables of other frameworks. Each HOROVOD_* alias sets its
// setting in herd's units, herd's own variable wins and says so, bad alias
// values fail naming the alias, and the HOROVOD_* variables herd cannot
// honour draw a warning naming the reason.
#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/config.h"
#include "tests/unit/core/config_reading.h"

namespace herd::detail {

using namespace config_test;

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

}  // namespace herd::detail
