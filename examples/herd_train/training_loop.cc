#include "herd_train/training_loop.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "herd/error.h"
#include "herd/herd.h"
#include "herd/tensor.h"
#include "herd/train/checkpoint.h"
#include "herd/train/progress.h"
#include "herd/train/sampler.h"
#include "herd_train/batch_loader.h"
#include "herd_train/gradient_exchange.h"
#include "herd_train/idx_dataset.h"
#include "herd_train/mlp.h"
#include "herd_train/rec_dataset.h"

namespace herd_train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string join_sizes(const std::vector<int64_t>& sizes) {
  std::string text;
  for (int64_t s : sizes) text += (text.empty() ? "" : "-") + std::to_string(s);
  return text;
}

// FNV-1a (64-bit) over every parameter's bytes, in parameter order.
uint64_t parameter_checksum(const std::vector<herd::Parameter>& params) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (const herd::Parameter& p : params) {
    const auto* bytes = reinterpret_cast<const unsigned char*>(p.value());
    for (std::size_t i = 0; i < static_cast<std::size_t>(p.size()) * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 0x100000001b3ull;
    }
  }
  return hash;
}

// The Euclidean norm of all parameters, summed in double: a value to compare
// within a tolerance where bitwise equality is not expected.
double parameter_norm(const std::vector<herd::Parameter>& params) {
  double sum = 0;
  for (const herd::Parameter& p : params) {
    for (int64_t i = 0; i < p.size(); ++i) sum += static_cast<double>(p.value()[i]) * p.value()[i];
  }
  return std::sqrt(sum);
}

// Sums `values` over the ranks, in place.
void allreduce_sum(const std::string& name, std::vector<double>& values) {
  herd::TensorView view{
      values.data(), herd::DataType::kFloat64, {static_cast<int64_t>(values.size())}};
  herd::allreduce(name, view, view, herd::ReduceOp::kSum);
}

// The line rank 0's progress display shows during an epoch.
std::string progress_text(int epoch, int epochs, int64_t step, int64_t steps, double loss,
                          double samples_per_second) {
  char text[160];
  std::snprintf(text, sizeof(text),
                "epoch %d/%d step %" PRId64 "/%" PRId64 " (%" PRId64 "%%) loss %.4f %.0f samples/s",
                epoch, epochs, step, steps, step * 100 / steps, loss, samples_per_second);
  return text;
}

// Fraction right on the test set: each rank predicts its samples `indices`,
// in chunks of 1000 from the first, and the counts are summed over the ranks.
// Every sample of the test set is some rank's exactly once.
double test_accuracy(Mlp& mlp, const Dataset& test, const std::vector<int64_t>& indices) {
  const int64_t chunk = 1000;
  std::vector<float> inputs;
  double correct = 0, count = 0;
  for (std::size_t start = 0; start < indices.size(); start += chunk) {
    const std::size_t n = std::min<std::size_t>(chunk, indices.size() - start);
    inputs.resize(n * test.features());
    for (std::size_t j = 0; j < n; ++j) {
      pixels_to_inputs(test.image(indices[start + j]), test.features(),
                       inputs.data() + j * test.features());
    }
    mlp.predict(inputs.data(), static_cast<int64_t>(n));
    const std::vector<int> predicted = mlp.predictions();
    for (std::size_t j = 0; j < n; ++j) {
      if (predicted[j] == test.labels[indices[start + j]]) correct += 1;
    }
    count += static_cast<double>(n);
  }
  std::vector<double> totals = {correct, count};
  allreduce_sum("herd_train/test_accuracy", totals);
  return totals[1] > 0 ? totals[0] / totals[1] : 0.0;
}

// Drops every sample of `data` after its first `count` (--max-test-samples).
void keep_first_samples(Dataset& data, int64_t count) {
  if (data.count <= count) return;
  data.count = count;
  data.pixels.resize(static_cast<std::size_t>(count * data.features()));
  data.labels.resize(static_cast<std::size_t>(count));
}

// The launch of this job: 0 for the first, k for the k-th relaunch after a
// failure (HERD_RESTART_COUNT, set by herdrun --max-restarts).
int restart_count() {
  const char* text = std::getenv("HERD_RESTART_COUNT");
  if (text == nullptr || *text == '\0') return 0;
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (*end != '\0' || value < 0) {
    throw herd::Error(std::string("HERD_RESTART_COUNT is '") + text +
                      "'; expected a non-negative integer (the launch count)");
  }
  return static_cast<int>(value);
}

bool file_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

// Metadata of a checkpoint written within an epoch: the batches of the epoch
// already done, and the epoch's batch count then.
constexpr const char* kEpochStepKey = "epoch_step";
constexpr const char* kStepsPerEpochKey = "steps_per_epoch";

int64_t metadata_integer(const herd::Checkpoint& ck, const std::string& path, const char* key) {
  const auto found = ck.metadata.find(key);
  if (found == ck.metadata.end()) return 0;
  char* end = nullptr;
  const long long value = std::strtoll(found->second.c_str(), &end, 10);
  if (found->second.empty() || *end != '\0' || value < 0) {
    throw herd::Error("checkpoint " + path + ": metadata " + key + " is '" + found->second +
                      "'; expected a non-negative integer");
  }
  return value;
}

// Every rank's message (empty: no failure) to every rank, so that a failure
// found by some ranks (a bad record in their part of a file) ends every
// rank with the same text. Throws herd::Error with the failures when any
// rank has one: "on rank R: message" each, or the message alone when every
// rank failed alike.
void share_failures(const std::string& name, const std::string& message) {
  const int ranks = herd::size();
  std::vector<double> lengths(static_cast<std::size_t>(ranks), 0.0);
  lengths[static_cast<std::size_t>(herd::rank())] = static_cast<double>(message.size());
  allreduce_sum(name + "/lengths", lengths);
  if (std::all_of(lengths.begin(), lengths.end(), [](double l) { return l == 0; })) return;
  // One byte more than the message, so that no rank contributes nothing.
  std::vector<uint8_t> bytes(message.begin(), message.end());
  bytes.push_back(0);
  herd::Tensor gathered;
  herd::allgather(
      name + "/messages",
      herd::TensorView{bytes.data(), herd::DataType::kUInt8, {static_cast<int64_t>(bytes.size())}},
      &gathered);
  const char* text = gathered.data_as<char>();
  std::vector<std::pair<int, std::string>> failures;
  for (int r = 0; r < ranks; ++r) {
    const auto length = static_cast<std::size_t>(lengths[static_cast<std::size_t>(r)]);
    if (length > 0) failures.emplace_back(r, std::string(text, length));
    text += length + 1;
  }
  const bool alike = static_cast<int>(failures.size()) == ranks &&
                     std::all_of(failures.begin(), failures.end(), [&](const auto& f) {
                       return f.second == failures.front().second;
                     });
  if (alike) throw herd::Error(failures.front().second);
  std::string all;
  for (const auto& [r, text_of_rank] : failures) {
    all += (all.empty() ? "" : "; ") + std::string("on rank ") + std::to_string(r) + ": " +
           text_of_rank;
  }
  throw herd::Error(all);
}

// Every rank's value, in rank order.
std::vector<int64_t> gather_counts(const std::string& name, int64_t value) {
  std::vector<double> values(static_cast<std::size_t>(herd::size()), 0.0);
  values[static_cast<std::size_t>(herd::rank())] = static_cast<double>(value);
  allreduce_sum(name, values);
  return std::vector<int64_t>(values.begin(), values.end());
}

std::string join_counts(const std::vector<int64_t>& counts) {
  std::string text;
  for (int64_t c : counts) text += (text.empty() ? "" : ", ") + std::to_string(c);
  return text;
}

// The training or test data as this rank sees it.
struct DataSource {
  std::string description;  // for the banner
  std::unique_ptr<RecDataset> rec;
  std::vector<int64_t> part_sizes;  // every rank's part of `rec`, in rank order
};

// "train.rec by index (train.idx), 60000 records in parts of 30000, 30000".
std::string describe_rec(const RecDataset& rec, const std::vector<int64_t>& part_sizes) {
  int64_t total = 0;
  for (int64_t c : part_sizes) total += c;
  return rec.path() +
         (rec.index_path().empty() ? " by byte range" : " by index (" + rec.index_path() + ")") +
         ", " + std::to_string(total) + " records of " + std::to_string(rec.features()) +
         " pixels in parts of " + join_counts(part_sizes);
}

// A part of nothing cannot be read for a whole epoch: refused on every rank.
void check_parts_not_empty(const std::string& what, const std::vector<int64_t>& part_sizes) {
  for (std::size_t p = 0; p < part_sizes.size(); ++p) {
    if (part_sizes[p] == 0) {
      throw herd::Error(what + ": part " + std::to_string(p) + " of " +
                        std::to_string(part_sizes.size()) +
                        " (one per worker) holds no records; the parts hold " +
                        join_counts(part_sizes) + ": use fewer workers or more records");
    }
  }
}

// This rank's parts of --data and --val-data (when given): the shards opened
// and each file's first record read (its pixel count), the test part read
// and kept in `test`. A failure here (a missing file, a bad .idx, a bad test
// record) ends every rank, before the first step, with its message. The
// training part is not read ahead: a bad record in it ends the job when its
// batch is loaded (next_rec_batch). `idx_features`: the IDX training images'
// size, when --data is not given.
void open_rec_sources(const TrainOptions& o, int64_t idx_features, DataSource* train,
                      DataSource* test_source, Dataset* test) {
  const int rank = herd::rank();
  const int ranks = herd::size();
  std::string failure;
  try {
    if (!o.data.empty()) {
      train->rec = std::make_unique<RecDataset>(o.data, rank, ranks);
    }
    if (!o.val_data.empty()) {
      test_source->rec = std::make_unique<RecDataset>(o.val_data, rank, ranks);
      *test = test_source->rec->read_part(o.data_threads, /*keep=*/true);
    }
    const int64_t train_features = train->rec ? train->rec->features() : idx_features;
    if (test_source->rec && test_source->rec->features() != train_features) {
      throw herd::Error(o.val_data + "'s records hold " +
                        std::to_string(test_source->rec->features()) + " pixels, but " +
                        (train->rec ? o.data + "'s" : std::string("the IDX training images")) +
                        " hold " + std::to_string(train_features) +
                        "; the test images must be the training images' size");
    }
  } catch (const std::exception& e) {
    failure = e.what();
  }
  share_failures("herd_train/data_check", failure);
  for (auto [source, name] : {std::pair<DataSource*, const char*>{train, "train"},
                              std::pair<DataSource*, const char*>{test_source, "test"}}) {
    if (!source->rec) continue;
    source->part_sizes =
        gather_counts(std::string("herd_train/") + name + "_parts", source->rec->count());
    check_parts_not_empty(source->rec->path(), source->part_sizes);
    source->description = describe_rec(*source->rec, source->part_sizes);
  }
}

// The next batch of a .rec part. A record that fails to load (bad framing,
// size or label; found on this rank alone, mid-epoch) ends the job on every
// rank through herd::fail, whose message names the file and offset; the
// other ranks' collectives then fail with it, naming this rank, instead of
// waiting for it. Rethrows, herd being shut down here.
const BatchLoader::Batch& next_rec_batch(RecBatchLoader& loader) {
  try {
    return loader.next();
  } catch (const std::exception& e) {
    herd::fail(e.what());
    throw;
  }
}

}  // namespace

int run_training(const TrainOptions& o) {
  const int rank = herd::rank();
  const int ranks = herd::size();
  const bool print = rank == 0;

  // The IDX files are read for what no .rec file replaces; --data without
  // --val-data trains with no test set.
  const bool rec_train = !o.data.empty();
  const bool has_test = !rec_train || !o.val_data.empty();
  std::string dir;
  if (!rec_train || o.val_data.empty()) {
    try {
      dir = find_fashion_mnist_dir(o.data_dir);
    } catch (const herd::Error& e) {
      if (print) std::fprintf(stderr, "herd-train: %s\n", e.what());
      return kExitDataMissing;
    }
  }
  const Dataset train = rec_train ? Dataset{} : load_fashion_mnist(dir, Split::kTrain);
  Dataset test = has_test && o.val_data.empty() ? load_fashion_mnist(dir, Split::kTest) : Dataset{};
  if (o.max_test_samples > 0) keep_first_samples(test, o.max_test_samples);

  DataSource train_source, test_source;
  open_rec_sources(o, train.features(), &train_source, &test_source, &test);
  const int64_t features = rec_train ? train_source.rec->features() : train.features();
  // This rank's test samples: all of its part of --val-data; of the IDX test
  // set, positions rank, rank + R, ... or, with --data-sharding parts, its
  // contiguous part (the samples a .rec file of it gives this rank).
  std::vector<int64_t> test_indices;
  if (test_source.rec) {
    for (int64_t i = 0; i < test.count; ++i) test_indices.push_back(i);
  } else if (o.data_sharding == "parts") {
    const auto [first, last] = herd::contiguous_part(test.count, rank, ranks);
    for (int64_t i = first; i < last; ++i) test_indices.push_back(i);
  } else {
    for (int64_t i = rank; i < test.count; i += ranks) test_indices.push_back(i);
  }

  MlpOptions mlp_options;
  mlp_options.sizes = {features};
  mlp_options.sizes.insert(mlp_options.sizes.end(), o.hidden.begin(), o.hidden.end());
  mlp_options.sizes.push_back(kNumClasses);
  mlp_options.seed = o.seed;
  Mlp mlp(mlp_options);
  const std::vector<herd::Parameter>& params = mlp.parameters();

  int start_epoch = 0;
  int64_t start_step = 0;  // batches of start_epoch already done
  int64_t global_step = 0;
  uint64_t data_seed = o.seed;
  std::unique_ptr<herd::Checkpoint> resume;
  const int launch = restart_count();
  // A relaunched job continues from the last commit; before the first
  // commit there is none, and it starts over.
  const bool resuming =
      o.resume || (launch > 0 && !o.checkpoint.empty() && file_exists(o.checkpoint));
  if (!resuming && rank == 0 && !o.checkpoint.empty() && std::getenv("HERD_RESTART_COUNT")) {
    // The first launch of a restartable job: a checkpoint already there is
    // another run's, which a relaunch before this run's first commit must
    // not resume.
    std::remove(o.checkpoint.c_str());
  }
  if (resuming) {
    resume = std::make_unique<herd::Checkpoint>(herd::load_checkpoint(o.checkpoint));
    auto found = resume->metadata.find("optimizer");
    if (found != resume->metadata.end() && found->second != o.optimizer) {
      throw herd::Error("checkpoint " + o.checkpoint + " was written with --optimizer " +
                        found->second + ", this run has --optimizer " + o.optimizer);
    }
    start_epoch = static_cast<int>(resume->epoch);
    start_step = metadata_integer(*resume, o.checkpoint, kEpochStepKey);
    global_step = resume->step;
    data_seed = resume->seed;
  }

  // Strided: one shuffled order, rank r takes positions r, r + R, ...
  // (drop_last: floor(n / R) each), whole batches only. Parts: each rank its
  // own part (of the .rec file, or a contiguous part of the IDX samples),
  // shuffled on its own; every rank runs ceil(largest part / batch) steps,
  // a smaller part repeating its first samples (round_batch).
  const bool by_parts = o.data_sharding == "parts";
  herd::DistributedSampler sampler(train.count, ranks, rank, data_seed, /*shuffle=*/true,
                                   /*drop_last=*/true);
  int64_t part_first = 0;  // an IDX part's first sample
  int64_t part_size = 0;
  int64_t largest_part = 0;
  if (rec_train) {
    part_size = train_source.rec->count();
    largest_part =
        *std::max_element(train_source.part_sizes.begin(), train_source.part_sizes.end());
  } else if (by_parts) {
    const auto [first, last] = herd::contiguous_part(train.count, rank, ranks);
    part_first = first;
    part_size = last - first;
    largest_part = herd::contiguous_part(train.count, 0, ranks).second;
    std::vector<int64_t> sizes;
    for (int p = 0; p < ranks; ++p) {
      const auto part = herd::contiguous_part(train.count, p, ranks);
      sizes.push_back(part.second - part.first);
    }
    check_parts_not_empty("the IDX training set (--data-sharding parts)", sizes);
  }
  const int64_t samples_per_rank = by_parts ? largest_part : sampler.num_samples();
  int64_t steps_per_epoch = by_parts ? (largest_part + o.batch_size - 1) / o.batch_size
                                     : sampler.num_samples() / o.batch_size;
  if (o.max_steps_per_epoch > 0) steps_per_epoch = std::min(steps_per_epoch, o.max_steps_per_epoch);
  // Whole updates only, so that no accumulation straddles an epoch (or a checkpoint).
  steps_per_epoch -= steps_per_epoch % o.gradient_accumulation;
  if (steps_per_epoch <= 0) {
    throw herd::Error("an epoch has no complete step: " + std::to_string(samples_per_rank) +
                      " samples per rank, --batch-size " + std::to_string(o.batch_size) +
                      ", --gradient-accumulation " + std::to_string(o.gradient_accumulation));
  }
  const herd::PartSampler part_sampler(by_parts ? part_size : 0,
                                       by_parts ? steps_per_epoch * o.batch_size : 0, data_seed);
  if (start_step > 0) {
    const int64_t written = metadata_integer(*resume, o.checkpoint, kStepsPerEpochKey);
    if (written != steps_per_epoch) {
      throw herd::Error("checkpoint " + o.checkpoint + " was written " +
                        std::to_string(start_step) + " steps into an epoch of " +
                        std::to_string(written) + " steps, but this run's epochs have " +
                        std::to_string(steps_per_epoch) +
                        " (--batch-size, --max-steps-per-epoch and the number of ranks "
                        "must be those of the run that wrote it)");
    }
  }
  std::unique_ptr<GradientExchange> exchange = make_gradient_exchange(
      o, params, steps_per_epoch / o.gradient_accumulation, resume.get(), o.checkpoint);
  resume.reset();

  if (print) {
    std::printf("herd-train: %d worker%s", ranks, ranks == 1 ? "" : "s");
    if (o.num_servers > 0) {
      std::printf(" and %d parameter server%s", o.num_servers, o.num_servers == 1 ? "" : "s");
    }
    if (!rec_train && !test_source.rec) {
      std::printf(", Fashion-MNIST from %s: %" PRId64 " train, %" PRId64 " test samples\n",
                  dir.c_str(), train.count, test.count);
    } else {
      const std::string idx_train =
          "Fashion-MNIST from " + dir + ", " + std::to_string(train.count) + " samples";
      const std::string idx_test =
          has_test ? "Fashion-MNIST from " + dir + ", " + std::to_string(test.count) + " samples"
                   : "none (no --val-data)";
      std::printf("\n  train: %s\n  test: %s\n",
                  (rec_train ? train_source.description : idx_train).c_str(),
                  (test_source.rec ? test_source.description : idx_test).c_str());
    }
    std::printf("  model mlp %s, %" PRId64 " parameters in %zu tensors\n",
                join_sizes(mlp.sizes()).c_str(), mlp.num_parameters(), params.size());
    std::printf("%s", describe_train_options(o).c_str());
    // Each dist_async update applies one worker's push alone.
    const int64_t update_batch =
        o.batch_size * o.gradient_accumulation * (o.engine == Engine::kParameterServer ? 1 : ranks);
    std::printf("  %" PRId64 " steps per epoch, %" PRId64 " samples per update\n", steps_per_epoch,
                update_batch);
    if (resuming) {
      std::printf("  resumed from %s at epoch %d", o.checkpoint.c_str(), start_epoch + 1);
      if (start_step > 0) std::printf(", batch %" PRId64, start_step);
      std::printf(" (step %" PRId64 ", data seed %" PRIu64 ")", global_step, data_seed);
      if (launch > 0) std::printf(" on launch %d", launch);
      std::printf("\n");
    }
    std::printf("%5s %10s %9s %12s %9s\n", "epoch", "train_loss", "test_acc", "samples/s",
                "time_s");
    std::fflush(stdout);
  }

  // Rank 0 alone shows progress; in place on a terminal, else a line every
  // --progress-interval seconds (under mpirun stderr is a pipe).
  const herd::ProgressStyle progress_style =
      print ? herd::progress_style(herd::parse_progress_mode(o.progress), herd::is_terminal(stderr))
            : herd::ProgressStyle::kOff;
  const auto progress_interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(o.progress_interval));
  const GradMode mode = o.gradient_accumulation > 1 ? GradMode::kAccumulate : GradMode::kOverwrite;
  const Mlp::GradHook hook = [&exchange](int, const std::vector<herd::Parameter>& layer) {
    exchange->grad_ready(layer);
  };
  mlp.zero_grad();
  const bool slowed = o.slow_rank == rank && o.slow_factor > 1;
  const bool killer = launch == 0 && o.kill_rank == rank;
  const std::map<std::string, std::string> description = {
      {"model", "mlp " + join_sizes(mlp.sizes())}, {"optimizer", o.optimizer}};
  double training_seconds = 0;  // this worker's steps, evaluation excluded
  int64_t steps_done = 0;

  for (int epoch = start_epoch; epoch < o.epochs; ++epoch) {
    const Clock::time_point epoch_start = Clock::now();
    sampler.set_epoch(epoch);
    // A resumed epoch skips the batches done before the commit it resumes.
    const int64_t first_step = epoch == start_epoch ? start_step : 0;
    std::vector<int64_t> indices = by_parts ? part_sampler.indices(epoch) : sampler.indices();
    indices.erase(indices.begin(), indices.begin() + first_step * o.batch_size);
    // An IDX part's positions become sample indices; a .rec part's stay
    // positions within the part.
    if (by_parts && !rec_train) {
      for (int64_t& i : indices) i += part_first;
    }
    herd::ProgressDisplay progress(stderr, progress_style, progress_interval, epoch_start);
    double loss_sum = 0;
    // --data-threads workers gather this epoch's batches (the samples of
    // `indices` in order, as the training thread did before) ahead of the
    // steps, into at most 2 x data-threads buffers; next() hands them out in
    // step order, so results do not depend on the thread count. With the data
    // in memory this saves only the copies (a small gain). The loader joins
    // its threads when it goes out of scope, also on an exception.
    //
    // From a .rec file, RecBatchLoader reads the batches' records the same
    // way (herd::data::RecordPrefetcher on --data-threads threads, at most
    // 2 x data-threads batches ahead) and decodes them on this thread.
    std::unique_ptr<BatchLoader> loader;
    std::unique_ptr<RecBatchLoader> rec_loader;
    if (rec_train) {
      rec_loader = std::make_unique<RecBatchLoader>(*train_source.rec, indices, o.batch_size,
                                                    steps_per_epoch - first_step, o.data_threads);
    } else {
      loader = std::make_unique<BatchLoader>(train, indices, o.batch_size,
                                             steps_per_epoch - first_step, o.data_threads);
    }
    for (int64_t step = first_step; step < steps_per_epoch; ++step) {
      const BatchLoader::Batch& batch = rec_loader ? next_rec_batch(*rec_loader) : loader->next();
      // An update's rate is the schedule's at its first pass (a KVStore
      // counts updates, each --gradient-accumulation passes long).
      const double position =
          epoch + static_cast<double>(step - step % o.gradient_accumulation) / steps_per_epoch;
      const Clock::time_point compute_start = Clock::now();
      const float loss = mlp.forward(batch.inputs.data(), batch.labels.data(), o.batch_size);
      loss_sum += loss;
      mlp.backward(hook, mode);
      if (o.device_ms > 0) {
        // Compute on a simulated device: time that takes no core.
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(o.device_ms));
      }
      if (slowed) {
        // A straggler: this worker's compute takes slow_factor times as long.
        std::this_thread::sleep_for((Clock::now() - compute_start) * (o.slow_factor - 1));
      }
      if (exchange->step(position)) {
        ++global_step;
        if (mode == GradMode::kAccumulate) mlp.zero_grad();
        // Within the epoch only: its end writes the checkpoint below.
        if (o.commit_every > 0 && global_step % o.commit_every == 0 && step + 1 < steps_per_epoch &&
            rank == 0) {
          std::map<std::string, std::string> metadata = description;
          metadata[kEpochStepKey] = std::to_string(step + 1);
          metadata[kStepsPerEpochKey] = std::to_string(steps_per_epoch);
          exchange->save_checkpoint(o.checkpoint, global_step, epoch, data_seed, metadata);
        }
        if (killer && global_step == o.kill_at_step) {
          std::fprintf(stderr, "herd-train: rank %d: --kill-rank: SIGKILL after step %" PRId64 "\n",
                       rank, global_step);
          std::fflush(stderr);
          std::raise(SIGKILL);
        }
      }
      if (progress.due()) {
        // The rate and loss of a resumed epoch count the batches of this launch.
        const int64_t steps_run = step + 1 - first_step;
        const double samples = static_cast<double>(steps_run * o.batch_size * ranks);
        progress.show(progress_text(epoch + 1, o.epochs, step + 1, steps_per_epoch,
                                    loss_sum / static_cast<double>(steps_run),
                                    samples / seconds_since(epoch_start)));
      }
    }
    progress.clear();
    const double train_seconds = seconds_since(epoch_start);
    training_seconds += train_seconds;
    steps_done += steps_per_epoch - first_step;
    exchange->refresh_parameters();

    // A resumed epoch's loss and rate count the batches of this launch.
    const int64_t steps_run = steps_per_epoch - first_step;
    std::vector<double> loss_totals = {loss_sum, static_cast<double>(steps_run)};
    allreduce_sum("herd_train/train_loss", loss_totals);
    const double accuracy = has_test ? test_accuracy(mlp, test, test_indices) : 0.0;

    if (!o.checkpoint.empty() && rank == 0) {
      exchange->save_checkpoint(o.checkpoint, global_step, epoch + 1, data_seed, description);
    }
    const double epoch_seconds = seconds_since(epoch_start);
    if (print) {
      const double samples =
          static_cast<double>(steps_run) * static_cast<double>(o.batch_size) * ranks;
      if (has_test) {
        std::printf("%5d %10.4f %8.2f%% %12.0f %9.2f\n", epoch + 1, loss_totals[0] / loss_totals[1],
                    accuracy * 100, samples / train_seconds, epoch_seconds);
      } else {
        std::printf("%5d %10.4f %9s %12.0f %9.2f\n", epoch + 1, loss_totals[0] / loss_totals[1],
                    "-", samples / train_seconds, epoch_seconds);
      }
      std::fflush(stdout);
    }
  }
  // Nobody reads the checkpoint before every rank is done with this run.
  herd::barrier();
  if (o.print_step_rates) {
    std::vector<double> rates(static_cast<std::size_t>(ranks), 0.0);
    if (training_seconds > 0) rates[rank] = static_cast<double>(steps_done) / training_seconds;
    allreduce_sum("herd_train/step_rates", rates);
    if (print) {
      std::printf("steps/s:");
      for (double r : rates) std::printf(" %.1f", r);
      std::printf("\n");
    }
  }
  if (print && o.print_checksum) {
    std::printf("checksum: %016" PRIx64 "\n", parameter_checksum(params));
    std::printf("parameter norm: %.9g\n", parameter_norm(params));
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace herd_train
