// herdrun's mpirun command for a table of flag combinations, each written out
// word by word as the expected command, and the HERD_* settings each flag
// maps to (horovodrun's units: MiB, milliseconds, seconds).
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "launcher/herdrun/mpirun_command.h"

namespace herd::launcher {
namespace {

using Words = std::vector<std::string>;

LaunchOptions job(int np, Words command = {"python3", "train.py"}) {
  LaunchOptions options;
  options.num_proc = np;
  options.command = std::move(command);
  return options;
}

LaunchContext machine(int cores, bool root = false) {
  LaunchContext context;
  context.mpirun = "/usr/bin/mpirun";
  context.cores = cores;
  context.root = root;
  return context;
}

Words concat(std::initializer_list<Words> parts) {
  Words all;
  for (const auto& part : parts) all.insert(all.end(), part.begin(), part.end());
  return all;
}

const Words kBinding = {"--bind-to", "none", "--map-by", "slot"};

TEST_CASE("herdrun's mpirun command, flag by flag") {
  struct Row {
    const char* what;
    LaunchOptions options;
    LaunchContext context;
    Words expected;
    size_t notes;
  };
  LaunchOptions plain = job(2);
  LaunchOptions many = job(4);
  LaunchOptions asked = job(2);
  asked.oversubscribe = true;
  LaunchOptions tuned = job(2);
  tuned.fusion_threshold_mb = 32;
  tuned.cycle_time_ms = 2.5;
  tuned.cache_capacity = 0;
  tuned.timeline_filename = "/tmp/tl.%r.json";
  tuned.timeline_mark_cycles = true;
  tuned.autotune = true;
  tuned.autotune_log_file = "trials.csv";
  tuned.autotune_warmup_samples = 0;
  tuned.autotune_steps_per_sample = 5;
  tuned.stall_check_seconds = 30;
  tuned.stall_shutdown_seconds = 90;
  tuned.log_level = "debug";
  tuned.hierarchical_allreduce = true;
  tuned.hierarchical_allgather = true;
  LaunchOptions no_stall = job(2);
  no_stall.no_stall_check = true;
  no_stall.stall_check_seconds = 5;  // --no-stall-check wins (CLI11 refuses both together)
  LaunchOptions flat = job(2);
  flat.no_hierarchical_allreduce = true;
  flat.no_hierarchical_allgather = true;
  LaunchOptions servers = job(2);
  servers.num_servers = 1;
  LaunchOptions extra = job(2);
  extra.mpi_args = "--map-by ppr:1:core --mca btl 'self,vader' -x \"A=b c\"";
  LaunchOptions bound = job(2);
  bound.binding_args = "--bind-to core";
  LaunchContext hosts = machine(2);
  hosts.hosts = {{"a", 2}, {"b", 2}};
  LaunchContext few_slots = machine(64);
  few_slots.hosts = {{"a", 1}, {"b", 1}};
  LaunchContext with_output = machine(2);
  with_output.output_dir = "/tmp/herdrun.abc";
  LaunchContext restarted = machine(2);
  restarted.restart_count = 3;

  const std::vector<Row> rows = {
      {"two ranks on two cores", plain, machine(2),
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"as root", plain, machine(2, true),
       concat({{"/usr/bin/mpirun", "--allow-run-as-root", "-np", "2"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"more ranks than cores", many, machine(2),
       concat({{"/usr/bin/mpirun", "--oversubscribe", "-np", "4"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       1},
      {"--oversubscribe asked", asked, machine(8),
       concat({{"/usr/bin/mpirun", "--oversubscribe", "-np", "2"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"every setting", tuned, machine(2),
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"-x",      "HERD_FUSION_THRESHOLD=33554432",
                "-x",      "HERD_CYCLE_TIME=2.5",
                "-x",      "HERD_CACHE_CAPACITY=0",
                "-x",      "HERD_HIERARCHICAL_ALLREDUCE=1",
                "-x",      "HERD_HIERARCHICAL_ALLGATHER=1",
                "-x",      "HERD_TIMELINE=/tmp/tl.%r.json",
                "-x",      "HERD_TIMELINE_MARK_CYCLES=1",
                "-x",      "HERD_AUTOTUNE=1",
                "-x",      "HERD_AUTOTUNE_LOG=trials.csv",
                "-x",      "HERD_AUTOTUNE_WARMUP_SAMPLES=0",
                "-x",      "HERD_AUTOTUNE_STEPS_PER_SAMPLE=5",
                "-x",      "HERD_STALL_CHECK_TIME=30",
                "-x",      "HERD_STALL_SHUTDOWN_TIME=90",
                "-x",      "HERD_LOG_LEVEL=debug",
                "-x",      "HERD_RESTART_COUNT=0",
                "python3", "train.py"}}),
       0},
      {"--no-stall-check", no_stall, machine(2),
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"-x", "HERD_STALL_CHECK_TIME=0", "-x", "HERD_STALL_SHUTDOWN_TIME=0", "-x",
                "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"--no-hierarchical-allreduce", flat, machine(2),
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"-x", "HERD_HIERARCHICAL_ALLREDUCE=0", "-x", "HERD_HIERARCHICAL_ALLGATHER=0", "-x",
                "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"parameter servers come on top of -np", servers, machine(4),
       concat({{"/usr/bin/mpirun", "-np", "3"},
               kBinding,
               {"-x", "HERD_NUM_SERVERS=1", "-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"--mpi-args split as a shell does", extra, machine(2),
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "--map-by", "ppr:1:core", "--mca", "btl",
                "self,vader", "-x", "A=b c", "python3", "train.py"}}),
       0},
      {"--binding-args replace the default",
       bound,
       machine(2),
       {"/usr/bin/mpirun", "-np", "2", "--bind-to", "core", "-x", "HERD_RESTART_COUNT=0", "python3",
        "train.py"},
       0},
      {"a directory for the ranks' output", plain, with_output,
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"--output-filename", "/tmp/herdrun.abc", "-x", "HERD_RESTART_COUNT=0", "python3",
                "train.py"}}),
       0},
      {"hosts", plain, hosts,
       concat({{"/usr/bin/mpirun", "-np", "2", "-H", "a:2,b:2"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       0},
      {"more ranks than the hosts' slots", many, few_slots,
       concat({{"/usr/bin/mpirun", "--oversubscribe", "-np", "4", "-H", "a:1,b:1"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=0", "python3", "train.py"}}),
       1},
      {"a relaunch", plain, restarted,
       concat({{"/usr/bin/mpirun", "-np", "2"},
               kBinding,
               {"-x", "HERD_RESTART_COUNT=3", "python3", "train.py"}}),
       0},
  };
  for (const auto& row : rows) {
    INFO(row.what);
    const MpirunCommand command = build_mpirun_command(row.options, row.context);
    CHECK(command.argv == row.expected);
    CHECK(command.notes.size() == row.notes);
  }
}

TEST_CASE("the oversubscription note names the ranks and the cores") {
  const MpirunCommand command = build_mpirun_command(job(5), machine(2));
  REQUIRE(command.notes.size() == 1);
  CHECK(command.notes[0].find("5 ranks on 2 cores") != std::string::npos);
  CHECK(command.notes[0].find("--oversubscribe") != std::string::npos);
}

TEST_CASE("the environment's HERD_* and HOROVOD_* reach the ranks, unless a flag sets them") {
  LaunchContext context = machine(2);
  context.environment = {
      {"PATH", "/bin"},           {"HOROVOD_FUSION_THRESHOLD", "1"}, {"HERD_CYCLE_TIME", "7"},
      {"HERD_LOG_LEVEL", "info"}, {"HERD_RESTART_COUNT", "9"},       {"HOME", "/root"},
      {"HERDING", "no"}};
  LaunchOptions options = job(2, {"prog"});
  options.log_level = "error";
  const MpirunCommand command = build_mpirun_command(options, context);
  const Words expected = concat({{"/usr/bin/mpirun", "-np", "2"},
                                 kBinding,
                                 {"-x", "HERD_CYCLE_TIME", "-x", "HOROVOD_FUSION_THRESHOLD", "-x",
                                  "HERD_LOG_LEVEL=error", "-x", "HERD_RESTART_COUNT=0", "prog"}});
  CHECK(command.argv == expected);

  // On other machines the ranks need the paths too.
  context.hosts = {{"a", 1}, {"b", 1}};
  context.environment.emplace_back("LD_LIBRARY_PATH", "/opt/lib");
  const MpirunCommand remote = build_mpirun_command(options, context);
  const Words expected_remote =
      concat({{"/usr/bin/mpirun", "-np", "2", "-H", "a:1,b:1"},
              kBinding,
              {"-x", "HERD_CYCLE_TIME", "-x", "HOROVOD_FUSION_THRESHOLD", "-x", "LD_LIBRARY_PATH",
               "-x", "PATH", "-x", "HERD_LOG_LEVEL=error", "-x", "HERD_RESTART_COUNT=0", "prog"}});
  CHECK(remote.argv == expected_remote);
}

TEST_CASE("herdrun refuses a job without a command or ranks") {
  CHECK_THROWS_WITH(build_mpirun_command(job(2, {}), machine(2)),
                    Catch::Contains("no command to run"));
  CHECK_THROWS_WITH(build_mpirun_command(job(0), machine(2)), Catch::Contains("-np 0"));
  LaunchOptions bad = job(2);
  bad.mpi_args = "--mca btl 'self";
  CHECK_THROWS_WITH(build_mpirun_command(bad, machine(2)), Catch::Contains("unterminated '"));
}

TEST_CASE("split_words and shell_join agree with a shell") {
  CHECK(split_words("") == Words{});
  CHECK(split_words("  a  b\tc ") == Words{"a", "b", "c"});
  CHECK(split_words(R"(a\ b "c \"d\" e" 'f\g')") == Words{"a b", "c \"d\" e", "f\\g"});
  CHECK(split_words(R"(x""y '')") == Words{"xy", ""});
  CHECK_THROWS_WITH(split_words("\"open"), Catch::Contains("unterminated \""));

  CHECK(shell_join({"mpirun", "-x", "HERD_TIMELINE=/tmp/t.%r.json"}) ==
        "mpirun -x HERD_TIMELINE=/tmp/t.%r.json");
  CHECK(shell_join({"python3", "-c", "print('hi there')", ""}) ==
        R"(python3 -c 'print('\''hi there'\'')' '')");
}

}  // namespace
}  // namespace herd::launcher
