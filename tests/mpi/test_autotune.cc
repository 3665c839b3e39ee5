// Autotuning through the whole runtime (HERD_AUTOTUNE=1, set by ctest with
// HERD_AUTOTUNE_LOG=<dir>/autotune.%r.csv, the path given as argument).
//
// Each step allreduces tensors of several sizes (some fused, some alone,
// through the shared-memory allreduce and its chunks) and checks every
// element against sums computed here; rank 0 then tells the others, by a
// broadcast, whether its log has its "best" row yet. Steps go on until it
// has, or fail after kMaxSteps. Then every rank's log must be the same file,
// byte for byte (every rank logs each trial with the cycle it applied it
// in, so equal files mean equal settings from equal cycles), and each log
// must be well formed: a header, trial 0 at cycle 0 with the defaults,
// trials in increasing cycles, positive scores, and a last row "best" whose
// settings and score are those of one of the trials. With a log that
// cannot be opened, every rank warns naming its path and the steps run on.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

constexpr int kMaxSteps = 3000;
// Elements of each tensor of a step: fused ones, ones larger than the
// default largest fused tensor, one longer than several shared-memory chunks.
constexpr int64_t kCounts[] = {256, 4096, 50000, 100000, 300000, 700000};

float input_value(int rank, int64_t index, int step) {
  return static_cast<float>((rank + 1) * (index % 97 + 1) + step % 5);
}

// The sum over `size` ranks of input_value, in integers.
float expected_sum(int size, int64_t index, int step) {
  int64_t sum = 0;
  for (int r = 0; r < size; ++r) sum += (r + 1) * (index % 97 + 1) + step % 5;
  return static_cast<float>(sum);
}

void run_step(Recorder& rec, int rank, int size, int step) {
  std::vector<std::vector<float>> buffers;
  std::vector<herd::Handle> handles;
  for (int64_t count : kCounts) {
    std::vector<float> values(static_cast<std::size_t>(count));
    for (int64_t i = 0; i < count; ++i)
      values[static_cast<std::size_t>(i)] = input_value(rank, i, step);
    buffers.push_back(std::move(values));
  }
  for (std::size_t t = 0; t < buffers.size(); ++t) {
    herd::TensorView view{buffers[t].data(), DataType::kFloat32, {kCounts[t]}};
    handles.push_back(
        herd::allreduce_async("grad." + std::to_string(t), view, view, ReduceOp::kSum));
  }
  for (const herd::Handle& handle : handles) herd::wait(handle);
  for (std::size_t t = 0; t < buffers.size(); ++t) {
    CaseCheck check(rec, "step " + std::to_string(step) + " grad." + std::to_string(t));
    for (int64_t i = 0; i < kCounts[t]; ++i) {
      const float expected = expected_sum(size, i, step);
      const float actual = buffers[t][static_cast<std::size_t>(i)];
      if (actual != expected) {
        check.mismatch(i, double_string(expected), double_string(actual));
      }
    }
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, separator);) parts.push_back(part);
  return parts;
}

bool has_best_row(const std::string& log) { return log.find("\nbest,") != std::string::npos; }

std::string log_path(const std::string& pattern, int rank) {
  std::string path = pattern;
  const std::size_t at = path.find("%r");
  if (at != std::string::npos) path.replace(at, 2, std::to_string(rank));
  return path;
}

void check_log(Recorder& rec, const std::string& log) {
  const std::string case_name = "log well formed";
  const std::vector<std::string> lines = split(log, '\n');
  if (!rec.check(lines.size() >= 3, case_name,
                 "expected a header, trials and best, got \"" + log + "\"")) {
    return;
  }
  rec.check(lines[0] ==
                "trial,cycle,fusion_threshold_bytes,fusion_max_tensor_bytes,shm_chunk_bytes,"
                "ring_segment_bytes,score_bytes_per_second",
            case_name, "header: " + lines[0]);
  // Trial 0 runs the defaults from the start.
  rec.check(lines[1].rfind("0,0,4194304,262144,", 0) == 0, case_name,
            "trial 0 should start at cycle 0 with the default fusion settings: " + lines[1]);
  long long last_cycle = -1;
  std::vector<std::vector<std::string>> trials;
  for (std::size_t i = 1; i + 1 < lines.size(); ++i) {
    const std::vector<std::string> fields = split(lines[i], ',');
    if (!rec.check(fields.size() == 7, case_name, "row of 7 fields: " + lines[i])) return;
    rec.check(fields[0] == std::to_string(i - 1), case_name, "trial number: " + lines[i]);
    const long long cycle = std::stoll(fields[1]);
    rec.check(cycle > last_cycle, case_name, "cycles increase: " + lines[i]);
    last_cycle = cycle;
    rec.check(std::stod(fields[6]) > 0.0, case_name, "positive score: " + lines[i]);
    trials.push_back(fields);
  }
  const std::vector<std::string> best = split(lines.back(), ',');
  if (!rec.check(best.size() == 7 && best[0] == "best", case_name, "best row: " + lines.back())) {
    return;
  }
  bool found = false;
  for (const auto& trial : trials) {
    found = found || (std::equal(trial.begin() + 2, trial.end(), best.begin() + 2));
  }
  rec.check(found, case_name, "the best row's settings and score are a trial's: " + lines.back());
}

// Tunes until rank 0's log has its best row, then compares the logs.
void tune_to_the_end(Recorder& rec, const std::string& pattern) {
  const int rank = herd::rank();
  const int size = herd::size();
  int step = 0;
  int32_t finished = 0;
  while (finished == 0 && step < kMaxSteps) {
    run_step(rec, rank, size, step);
    ++step;
    // Every rank must run the same steps: rank 0's log decides.
    if (rank == 0) finished = has_best_row(read_file(log_path(pattern, 0))) ? 1 : 0;
    herd::TensorView flag{&finished, DataType::kInt32, {}};
    herd::broadcast("finished", flag, 0);
  }
  if (rank == 0) std::printf("autotuning ended after %d steps\n", step);
  rec.check(finished == 1, "converged", "no best row after " + std::to_string(step) + " steps");
  herd::barrier();
  const std::string mine = read_file(log_path(pattern, rank));
  check_log(rec, mine);
  if (rank != 0) {
    const std::string rank0 = read_file(log_path(pattern, 0));
    rec.check(mine == rank0, "same trials in the same cycles",
              "rank " + std::to_string(rank) + "'s log \"" + mine + "\" differs from rank 0's \"" +
                  rank0 + "\"");
  }
}

// Runs `body` with this process's stderr going to a file; returns what it
// wrote there.
std::string capture_stderr(const std::function<void()>& body) {
  const std::string path = "test_autotune." + std::to_string(getpid()) + ".stderr";
  std::fflush(stderr);
  const int saved = dup(2);
  const int file = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (saved < 0 || file < 0) {
    body();
    return "cannot redirect stderr to " + path;
  }
  dup2(file, 2);
  close(file);
  body();
  std::fflush(stderr);
  dup2(saved, 2);
  close(saved);
  const std::string text = read_file(path);
  unlink(path.c_str());
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  // test_autotune LOG_PATTERN: tune to the end and compare the logs.
  // test_autotune unwritable LOG_PATTERN: the log cannot be opened; every
  // rank warns, naming its path, and the job runs on.
  const bool unwritable = argc == 3 && std::string(argv[1]) == "unwritable";
  if (argc != 2 && !unwritable) {
    std::fprintf(stderr, "usage: test_autotune [unwritable] LOG_PATTERN (HERD_AUTOTUNE_LOG)\n");
    return 2;
  }
  const std::string pattern = argv[argc - 1];
  bool started = false;
  Recorder* recorder = nullptr;
  std::unique_ptr<Recorder> owned;
  const std::string log = capture_stderr([&] {
    started = init_herd("test_autotune");
    if (!started) return;
    owned = std::make_unique<Recorder>("test_autotune", herd::rank());
    recorder = owned.get();
    if (unwritable) {
      for (int step = 0; step < 3; ++step) run_step(*recorder, herd::rank(), herd::size(), step);
    }
  });
  if (!started) {
    std::fputs(log.c_str(), stderr);
    return 1;
  }
  Recorder& rec = *recorder;
  try {
    if (unwritable) {
      const std::string warning =
          "] WARN: cannot open the autotune log '" + log_path(pattern, herd::rank()) + "'\n";
      rec.check(log.find(warning) != std::string::npos, "unwritable log warned",
                "expected \"..." + warning + "\" in stderr, got \"" + log + "\"");
    } else {
      std::fputs(log.c_str(), stderr);
      tune_to_the_end(rec, pattern);
    }
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
