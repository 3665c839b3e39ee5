// The runtime's allgather over the hierarchical allgather
// (collectives/hierarchical_allgather.h), run by ctest on 2 emulated hosts of
// 2 ranks.
//
// Every rank writes its timeline and gathers, through the public API,
// tensors whose first dims differ by rank (zero rows on some ranks, a whole
// host without rows), in float32, float64, int32, int8 and float16, with rows
// of 3 elements, and one float32 tensor of about 12 MiB of output. Element i
// of rank r's rows for tensor t is (r * 37 + i * 5 + t) % 97, exact in every
// dtype; the output is checked element by element against it. Then it reads
// back from its timeline which algorithm ran each tensor and checks it
// against argv[1]:
//   on    HERD_HIERARCHICAL_ALLGATHER=1 (with HERD_HIERARCHICAL_ALLREDUCE=0):
//         every tensor ran HIERARCHICAL_ALLGATHER;
//   auto  the default: tensors of 8 MiB of output and more ran it
//         (kHierarchicalAllgatherMinBytes, src/collective_executor.h), the
//         others RING_ALLGATHER.
#include <mpi.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "tests/mpi/mpi_test_util.h"
#include "tests/mpi/timeline_activities.h"

namespace {

using herd::DataType;
using namespace herd_test;

constexpr int64_t kRowElements = 3;
constexpr int64_t kHierarchicalMinBytes = 8 * 1024 * 1024;

double element(int rank, int64_t i, int tensor) {
  return static_cast<double>((rank * 37 + i * 5 + tensor) % 97);
}

struct Case {
  std::string name;
  DataType dtype;
  std::vector<int64_t> rows;  // per rank
  int tensor;
};

int64_t output_bytes(const Case& c) {
  const int64_t rows = std::accumulate(c.rows.begin(), c.rows.end(), int64_t{0});
  return rows * kRowElements * static_cast<int64_t>(dtype_bytes(c.dtype));
}

void run_case(Recorder& rec, const Case& c, int rank) {
  const int64_t count = c.rows[rank] * kRowElements;
  std::vector<uint64_t> input = storage_for(c.dtype, count);
  for (int64_t i = 0; i < count; ++i)
    store_value(c.dtype, input.data(), i, element(rank, i, c.tensor));
  herd::Tensor output{DataType::kUInt8, {1}};
  herd::allgather(c.name, {input.data(), c.dtype, {c.rows[rank], kRowElements}}, &output);
  const int64_t total_rows = std::accumulate(c.rows.begin(), c.rows.end(), int64_t{0});
  if (!rec.check(output.dtype() == c.dtype &&
                     output.shape() == std::vector<int64_t>{total_rows, kRowElements},
                 c.name,
                 "output dtype " + dtype_name(output.dtype()) + ", shape " +
                     shape_string(output.shape()) + "; expected " + dtype_name(c.dtype) + " " +
                     shape_string({total_rows, kRowElements}))) {
    return;
  }
  int64_t at = 0;
  for (std::size_t r = 0; r < c.rows.size(); ++r) {
    for (int64_t i = 0; i < c.rows[r] * kRowElements; ++i, ++at) {
      const double expected = element(static_cast<int>(r), i, c.tensor);
      const double actual = load_value(c.dtype, output.data(), at);
      if (actual != expected) {
        rec.fail(c.name, "element " + std::to_string(i) + " of rank " + std::to_string(r) +
                             "'s rows (output index " + std::to_string(at) + "): " +
                             double_string(actual) + ", expected " + double_string(expected));
        return;
      }
    }
  }
  rec.pass();
}

// tensor -> the allgather activity its timeline span names.
std::map<std::string, std::string> allgathers_run(Recorder& rec, const std::string& path) {
  std::map<std::string, std::string> runs;
  for (const TimelineActivity& run :
       timeline_activities(rec, path, {"HIERARCHICAL_ALLGATHER", "RING_ALLGATHER"})) {
    runs[run.tensor] = run.activity;
  }
  return runs;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "auto";
  herd::init();
  const int rank = herd::rank();
  const int size = herd::size();
  Recorder rec("test_hierarchical_allgather " + mode, rank);
  if (!rec.check(size == 4 && herd::local_size() == 2 && herd::cross_size() == 2, "layout",
                 "expected 2 hosts of 2 ranks, got size " + std::to_string(size))) {
    const int code = rec.finish();
    return shutdown_herd(rec) ? code : 1;
  }

  std::vector<Case> cases;
  int tensor = 0;
  for (DataType dtype : {DataType::kFloat32, DataType::kFloat64, DataType::kInt32, DataType::kInt8,
                         DataType::kFloat16}) {
    for (const std::vector<int64_t>& rows :
         {std::vector<int64_t>{3, 0, 5, 1}, std::vector<int64_t>{0, 0, 4, 2},
          std::vector<int64_t>{1, 2, 0, 0}, std::vector<int64_t>{1000, 1, 7, 3001}}) {
      cases.push_back(
          {"hag." + dtype_name(dtype) + "." + std::to_string(tensor), dtype, rows, tensor});
      ++tensor;
    }
  }
  // About 12 MiB of float32 output, odd row counts that split unevenly.
  const int64_t large = (int64_t{1} << 18) + 1;
  cases.push_back(
      {"hag.large", DataType::kFloat32, {large, large + 5, large + 2, large - 7}, tensor});

  const std::string prefix = "hierarchical_allgather." + std::to_string(getpid()) + ".";
  const std::string path = prefix + std::to_string(rank) + ".json";
  herd::start_timeline(prefix + "%r.json");
  for (const Case& c : cases) run_case(rec, c, rank);
  herd::stop_timeline();
  const std::map<std::string, std::string> runs = allgathers_run(rec, path);
  std::remove(path.c_str());

  for (const Case& c : cases) {
    const auto run = runs.find(c.name);
    if (!rec.check(run != runs.end(), "timeline", c.name + " has no allgather span in " + path)) {
      continue;
    }
    const bool hierarchical =
        mode == "on" || (mode == "auto" && output_bytes(c) >= kHierarchicalMinBytes);
    const std::string expected = hierarchical ? "HIERARCHICAL_ALLGATHER" : "RING_ALLGATHER";
    rec.check(run->second == expected, "path",
              c.name + " (" + std::to_string(output_bytes(c)) + " bytes of output) ran " +
                  run->second + " in mode " + mode + "; expected " + expected);
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
