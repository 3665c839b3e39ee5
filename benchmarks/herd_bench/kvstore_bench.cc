#include "benchmarks/herd_bench/kvstore_bench.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <herd/herd.h>
#include <herd/kvstore.h>
#include <herd/parameter_server.h>

#include "benchmarks/herd_bench/bench_mpi.h"
#include "benchmarks/herd_bench/kvstore_values.h"
#include "benchmarks/herd_bench/step_bench.h"
#include "benchmarks/herd_bench/step_plan.h"
#include "benchmarks/herd_bench/step_run.h"
#include "benchmarks/herd_bench/step_table.h"
#include "benchmarks/herd_bench/table.h"

namespace herd::bench {
namespace {

// The rows, in order. Each step moves every gradient of the model once, the
// keys in backward order (key = the parameter's registration index):
//   allreduce:         herd::allreduce_async of every gradient in place (the
//                      input copied into the output first, untimed), then a
//                      wait for all; the runtime fuses them: herd's own
//                      data-parallel step, the row the others are compared
//                      with.
//   allreduce-grouped: the same as one herd::grouped_allreduce.
//   horovod:           KVStore "horovod": one pushpull of every key, in
//                      place (copied first, untimed, as above).
//   dist_sync:         KVStore "dist_sync": one push of every key, then one
//                      pull of every key, the default updater (assign).
//   dist_async:        the same on "dist_async" (server ranks), whose servers
//                      need an optimizer: SGD with learning rate 0.
//   <type>+<compression>: the same with set_gradient_compression.
constexpr const char* kAllreduce = "allreduce";
constexpr const char* kAllreduceGrouped = "allreduce-grouped";
const char* const kKnownTypes[] = {"horovod", "dist_sync", "dist_async"};

// The bytes a store moved per step, from KVStore::stats() on worker 0.
struct Traffic {
  double sent = 0;
  double received = 0;
};

struct KvstoreRow {
  StepPathResult result;
  std::optional<Traffic> traffic;  // none for the allreduce row
};

// The worker ranks of `comm` (its first herd::size() ranks) as their own
// communicator. MPI_Comm_create_group is collective over the group only: the
// server ranks, inside herd::init for good, take no part.
class WorkerComm {
 public:
  explicit WorkerComm(MPI_Comm comm) {
    int size = 0;
    HERD_MPI_CHECK(MPI_Comm_size(comm, &size));
    servers_ = size - herd::size();
    if (servers_ == 0) {
      HERD_MPI_CHECK(MPI_Comm_dup(comm, &comm_));
      return;
    }
    MPI_Group all, workers;
    HERD_MPI_CHECK(MPI_Comm_group(comm, &all));
    int range[1][3] = {{0, herd::size() - 1, 1}};
    HERD_MPI_CHECK(MPI_Group_range_incl(all, 1, range, &workers));
    HERD_MPI_CHECK(MPI_Comm_create_group(comm, workers, 0, &comm_));
    HERD_MPI_WARN_IF_ERROR(MPI_Group_free(&workers));
    HERD_MPI_WARN_IF_ERROR(MPI_Group_free(&all));
  }
  ~WorkerComm() { HERD_MPI_WARN_IF_ERROR(MPI_Comm_free(&comm_)); }
  WorkerComm(const WorkerComm&) = delete;
  WorkerComm& operator=(const WorkerComm&) = delete;

  MPI_Comm get() const { return comm_; }
  int servers() const { return servers_; }

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  int servers_ = 0;
};

std::vector<std::string> types_to_run(const KvstoreBenchOptions& options, int servers) {
  if (!options.types.empty()) {
    for (const std::string& type : options.types) {
      if (type == "dist_async" && servers == 0) {
        throw std::runtime_error(
            "herd-bench kvstore: dist_async needs parameter-server ranks: set HERD_NUM_SERVERS "
            "(e.g. mpirun -np 3 -x HERD_NUM_SERVERS=1 ...)");
      }
    }
    return options.types;
  }
  std::vector<std::string> types = {"horovod", "dist_sync"};
  if (servers > 0) types.push_back("dist_async");
  return types;
}

double per_step(int64_t bytes, int steps) {
  return static_cast<double>(bytes) / static_cast<double>(steps);
}

std::string format_rate(const char* format, double value) {
  char text[64];
  std::snprintf(text, sizeof text, format, value);
  return text;
}

void print_kvstore_table(const KvstoreBenchOptions& options, const StepTableInfo& info, int servers,
                         const std::vector<KvstoreRow>& rows) {
  const Table notes(stdout, options.csv);
  notes.print_note("herd-bench kvstore: " + info.model + ", " + std::to_string(info.tensors) +
                   " gradients, " + std::to_string(info.elements) + " float32 (" +
                   format_bytes(info.bytes) + ") per step, " + std::to_string(info.ranks) +
                   (info.ranks == 1 ? " worker, " : " workers, ") + std::to_string(servers) +
                   (servers == 1 ? " server, " : " servers, ") + std::to_string(info.iterations) +
                   " timed steps after " + std::to_string(info.warmup) + " warmup");
  notes.print_note(
      "each step: allreduce = every gradient's allreduce_async in place, then a wait for all "
      "(fused by the runtime); allreduce-grouped = one grouped_allreduce of them; horovod = one "
      "pushpull of every key; dist_* = one push of every key, then one pull of every key "
      "(dist_sync: default updater, assign; dist_async: SGD with learning rate 0)");
  notes.print_note(
      "time: per step the slowest worker; median and mean over the steps; algbw = gradient "
      "bytes / median; vs_allreduce = median / the allreduce row's median");
  if (options.compression != "none") {
    notes.print_note("compression: " + options.compression + ", threshold " +
                     format_rate("%g", options.threshold) +
                     "; sent, received = KVStore::stats() bytes per step on worker 0");
  } else {
    notes.print_note("sent, received = KVStore::stats() bytes per step on worker 0");
  }
  double allreduce_median = 0;
  for (const KvstoreRow& row : rows) {
    if (row.result.path == kAllreduce) allreduce_median = row.result.stats.median_seconds;
  }
  if (options.csv) {
    std::printf(
        "model,workers,servers,tensors,bytes,path,median_ms,mean_ms,algbw_gbps,vs_allreduce,"
        "sent_bytes,received_bytes,wrong\n");
  } else {
    std::printf("%-20s %10s %10s %9s %9s %12s %12s %8s\n", "path", "median", "mean", "algbw",
                "vs_allred", "sent/step", "recv/step", "#wrong");
    std::printf("%-20s %10s %10s %9s %9s %12s %12s %8s\n", "", "(ms)", "(ms)", "(GB/s)", "(x)", "",
                "", "");
  }
  for (const KvstoreRow& row : rows) {
    const StepPathResult& r = row.result;
    const double median = r.stats.median_seconds;
    const double algbw = static_cast<double>(info.bytes) / median / 1e9;
    const double ratio = median / allreduce_median;
    if (options.csv) {
      const std::string sent = row.traffic ? format_rate("%.0f", row.traffic->sent) : std::string();
      const std::string received =
          row.traffic ? format_rate("%.0f", row.traffic->received) : std::string();
      std::printf("%s,%d,%d,%d,%lld,%s,%.3f,%.3f,%.3f,%.3f,%s,%s,%lld\n", info.model.c_str(),
                  info.ranks, servers, info.tensors, static_cast<long long>(info.bytes),
                  r.path.c_str(), median * 1e3, r.stats.mean_seconds * 1e3, algbw, ratio,
                  sent.c_str(), received.c_str(), static_cast<long long>(r.wrong));
    } else {
      const std::string sent =
          row.traffic ? format_bytes(static_cast<int64_t>(row.traffic->sent)) : std::string("-");
      const std::string received = row.traffic
                                       ? format_bytes(static_cast<int64_t>(row.traffic->received))
                                       : std::string("-");
      std::printf("%-20s %10.3f %10.3f %9.3f %9.2f %12s %12s %8lld\n", r.path.c_str(), median * 1e3,
                  r.stats.mean_seconds * 1e3, algbw, ratio, sent.c_str(), received.c_str(),
                  static_cast<long long>(r.wrong));
    }
  }
  std::fflush(stdout);
}

// One KVStore's rows: the store made, its keys initialised with rank 0's
// values, compression set when asked, then the push+pull (or pushpull) step
// measured and checked.
class KvstoreRows {
 public:
  KvstoreRows(StepRun& run, const KvstoreBenchOptions& options) : run_(run), options_(options) {
    for (const StepTensor& t : run_.plan) {
      keys_.emplace_back(t.index);
      inputs_.push_back({TensorView{run_.input_of(t), DataType::kFloat32, t.shape}});
      outputs_.push_back({TensorView{run_.output_of(t), DataType::kFloat32, t.shape}});
    }
  }

  KvstoreRow measure(const std::string& type, const std::string& compression) {
    const std::string path = compression == "none" ? type : type + "+" + compression;
    std::unique_ptr<kv::KVStore> kv = kv::create(type);
    const bool in_place = type == "horovod";
    if (!in_place) {
      std::vector<TensorView> first;
      for (const auto& values : inputs_) first.push_back(values[0]);
      kv->init(keys_, first);
    }
    const bool async = type == "dist_async";
    if (async) {
      // The servers need an optimizer (as upstream); learning rate 0 runs
      // their update and leaves the value checkable (kvstore_values.h).
      kv::OptimizerConfig sgd;
      sgd.sgd.lr = 0;
      kv->set_optimizer(sgd);
    }
    if (compression != "none") kv->set_gradient_compression({compression, options_.threshold});
    run_.check = checker(type, compression, kv->num_workers());
    const kv::Stats before = kv->stats();
    const std::vector<int64_t> updates_before =
        async ? kv->update_counts() : std::vector<int64_t>();
    KvstoreRow row;
    if (in_place) {
      row.result = run_.measure(
          path.c_str(), [&] { kv->pushpull(keys_, outputs_); }, [&] { copy_input_to_output(); });
    } else {
      row.result = run_.measure(path.c_str(), [&] {
        kv->push(keys_, inputs_);
        kv->pull(keys_, outputs_);
      });
    }
    const kv::Stats after = kv->stats();
    const int steps = options_.warmup + options_.iterations;
    row.traffic = Traffic{per_step(after.bytes_sent - before.bytes_sent, steps),
                          per_step(after.bytes_received - before.bytes_received, steps)};
    if (async) row.result.wrong += missing_server_updates(path, *kv, updates_before, steps);
    kv->barrier();
    return row;
  }

  // herd's own step, in place on the output (the input copied there first,
  // untimed): every gradient's allreduce_async, then a wait for all, fused
  // by the runtime; with `grouped`, one grouped_allreduce of them all.
  KvstoreRow measure_allreduce(bool grouped) {
    std::vector<std::string> names;
    std::vector<TensorView> views;
    const std::string prefix = grouped ? "herd-bench/kvstore/grouped/" : "herd-bench/kvstore/";
    for (const StepTensor& t : run_.plan) {
      names.push_back(prefix + t.name);
      views.push_back(TensorView{run_.output_of(t), DataType::kFloat32, t.shape});
    }
    std::vector<Handle> handles(views.size());
    const auto step = [&] {
      if (grouped) {
        herd::grouped_allreduce(names, views, views, ReduceOp::kSum);
        return;
      }
      for (std::size_t k = 0; k < views.size(); ++k) {
        handles[k] = herd::allreduce_async(names[k], views[k], views[k], ReduceOp::kSum);
      }
      for (const Handle& handle : handles) herd::wait(handle);
    };
    run_.check = [this](const char* path) { return run_.count_wrong(path); };
    KvstoreRow row;
    row.result = run_.measure(grouped ? kAllreduceGrouped : kAllreduce, step,
                              [&] { copy_input_to_output(); });
    row.result.baseline = !grouped;
    return row;
  }

 private:
  // The pushes the servers applied during the row against one per slice per
  // worker and step, the same on every worker (every push is acknowledged
  // before measure() returns): the difference, printed if any.
  int64_t missing_server_updates(const std::string& path, kv::KVStore& kv,
                                 const std::vector<int64_t>& before, int steps) {
    const std::vector<int64_t> after = kv.update_counts();
    int64_t applied = 0;
    for (std::size_t s = 0; s < after.size(); ++s) applied += after[s] - before[s];
    std::vector<int64_t> counts;
    for (const StepTensor& t : run_.plan) counts.push_back(t.count);
    const ps::Layout layout = ps::layout();
    const int64_t expected = expected_server_updates(counts, layout.num_workers, layout.num_servers,
                                                     layout.bigarray_bound, steps);
    if (applied == expected) return 0;
    if (run_.rank == 0) {
      std::fprintf(stderr, "%s: the servers applied %lld pushes, expected %lld\n", path.c_str(),
                   static_cast<long long>(applied), static_cast<long long>(expected));
    }
    return std::llabs(applied - expected);
  }

  void copy_input_to_output() {
    std::memcpy(run_.output.data(), run_.input.data(), run_.output.size() * sizeof(float));
  }

  // The values every row must pull (kvstore_values.h).
  std::function<int64_t(const char*)> checker(const std::string& type,
                                              const std::string& compression, int workers) {
    if (type == "dist_async") {
      return [this](const char* path) {
        return count_each(path, [](const StepTensor& t, const float* data, int64_t* first) {
          return count_wrong_rank_values(data, t.count, t.index, 0, first);
        });
      };
    }
    if (compression != "none") {
      const float expected = compressed_step_value(compression, options_.threshold, workers);
      return [this, expected](const char* path) {
        return count_each(path, [expected](const StepTensor& t, const float* data, int64_t* first) {
          return count_wrong_constant(data, t.count, expected, first);
        });
      };
    }
    return [this](const char* path) { return run_.count_wrong(path); };
  }

  // Counts over every gradient, printing the first wrong element.
  template <typename Count>
  int64_t count_each(const char* path, Count count) {
    int64_t wrong = 0;
    for (const StepTensor& t : run_.plan) {
      int64_t first = 0;
      const float* data = run_.output_of(t);
      const int64_t n = count(t, data, &first);
      if (n > 0 && wrong == 0) {
        std::fprintf(stderr, "rank %d: %s path, gradient %s, element %lld of %lld: actual %g\n",
                     run_.rank, path, t.name.c_str(), static_cast<long long>(first),
                     static_cast<long long>(t.count), static_cast<double>(data[first]));
      }
      wrong += n;
    }
    return wrong;
  }

  StepRun& run_;
  const KvstoreBenchOptions& options_;
  std::vector<kv::Key> keys_;
  std::vector<std::vector<TensorView>> inputs_;
  std::vector<std::vector<TensorView>> outputs_;
};

}  // namespace

CLI::App* add_kvstore_command(CLI::App& app, KvstoreBenchOptions& options) {
  CLI::App* command = app.add_subcommand(
      "kvstore",
      "A model's gradients pushed to and pulled from each KVStore type, beside herd's allreduce");
  add_model_option(*command, options.model, "Model whose gradients one step moves");
  command
      ->add_option("--types", options.types,
                   "Store types to run, in order (default: horovod, dist_sync, and dist_async "
                   "when the job has server ranks)")
      ->delimiter(',')
      ->check(
          CLI::IsMember(std::vector<std::string>(std::begin(kKnownTypes), std::end(kKnownTypes))));
  command
      ->add_option("--gradient-compression", options.compression,
                   "Also run each store that takes it with this compression")
      ->check(CLI::IsMember({"none", "2bit", "1bit"}));
  command->add_option("--threshold", options.threshold,
                      "Compression threshold (2bit: in (0, 1]; 1bit: below 1)");
  command->add_option("-n,--iters", options.iterations, "Timed steps per row")
      ->check(CLI::Range(1, 1 << 20));
  command->add_option("-w,--warmup_iters", options.warmup, "Untimed steps before them")
      ->check(CLI::Range(0, 1 << 20));
  command->add_flag("--csv", options.csv, "Print the table as CSV on stdout (notes on stderr)");
  add_progress_options(*command, options.progress);
  return command;
}

void validate_kvstore_options(const KvstoreBenchOptions& options) {
  const std::string why = check_compression_threshold(options.compression, options.threshold);
  if (!why.empty()) {
    throw CLI::ValidationError("--threshold", format_rate("%g", options.threshold) + ": " + why);
  }
}

int64_t run_kvstore_bench(const KvstoreBenchOptions& options, MPI_Comm comm) {
  const WorkerComm workers(comm);
  const std::vector<std::string> types = types_to_run(options, workers.servers());
  const bool compressed = options.compression != "none";
  int row_count = 2;
  for (const std::string& type : types) row_count += (compressed && type != "horovod") ? 2 : 1;

  // StepRun's plan, buffers, timing and check, without backward compute.
  StepBenchOptions step_options;
  step_options.model = options.model;
  step_options.iterations = options.iterations;
  step_options.warmup = options.warmup;
  step_options.progress = options.progress;
  StepRun run(step_options, workers.get(), row_count);
  KvstoreRows measured(run, options);

  std::vector<KvstoreRow> rows;
  rows.push_back(measured.measure_allreduce(/*grouped=*/false));
  rows.push_back(measured.measure_allreduce(/*grouped=*/true));
  for (const std::string& type : types) {
    rows.push_back(measured.measure(type, "none"));
    // The horovod store refuses compression (it has no push).
    if (compressed && type != "horovod")
      rows.push_back(measured.measure(type, options.compression));
  }

  // Worker 0's traffic is the one printed; the table's on worker 0 only.
  if (run.rank == 0) print_kvstore_table(options, run.table_info("cpu"), workers.servers(), rows);
  int64_t wrong = 0;
  for (const KvstoreRow& row : rows) wrong += row.result.wrong;
  return wrong;
}

}  // namespace herd::bench
