// Config: the settings table as a whole. setting_docs covers every Config
// field exactly once with its default, the settings compared across ranks and
// how their values print, and the names suggested for unknown HERD_*
// variables.
#include <map>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "src/config.h"
#include "tests/unit/core/config_reading.h"

namespace herd::detail {

using namespace config_test;

namespace {

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

}  // namespace

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

}  // namespace herd::detail
