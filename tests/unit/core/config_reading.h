// Reading a Config in the config tests: a map as the environment, so that no
// test touches the real one, the names of the Config fields a read changed,
// and the check that a bad value fails with herd's message and changes
// nothing.
#pragma once

#include <map>
#include <set>
#include <string>

#include <catch2/catch.hpp>

#include "common/status.h"
#include "src/config.h"

namespace herd::detail::config_test {

using Env = std::map<std::string, std::string>;

inline EnvLookup lookup_in(const Env& env) {
  return [&env](const char* variable) -> const char* {
    auto it = env.find(variable);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

inline Status read(const Env& env, Config* config) { return read_config(lookup_in(env), config); }

// Names of the Config fields that differ between a and b.
inline std::set<std::string> differing_fields(const Config& a, const Config& b) {
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

inline void check_rejected(const std::string& variable, const std::string& value,
                           const std::string& expected) {
  INFO(variable << "='" << value << "'");
  Config config;
  config.fusion_threshold_bytes = 12345;  // must survive a failed read
  Status status = read({{variable, value}}, &config);
  REQUIRE_FALSE(status.is_ok());
  CHECK(status.message() == variable + "='" + value + "': expected " + expected);
  CHECK(config.fusion_threshold_bytes == 12345);
}

// read_config's result, the fields it changed and its notes.
struct Read {
  Status status;
  Config config;
  std::set<std::string> changed;
  ConfigNotes notes;
};

inline Read read_with_notes(const Env& env) {
  Read result{Status::ok(), Config{}, {}, {}};
  result.status = read_config(lookup_in(env), &result.config, &result.notes);
  result.changed = differing_fields(result.config, Config{});
  return result;
}

}  // namespace herd::detail::config_test
