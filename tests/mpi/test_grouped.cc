// Multi-rank test of herd::grouped_allreduce and herd::barrier through the
// whole runtime.
//
// Every member of a group is reduced like an allreduce of its own, and the
// group's one handle completes only when all of them are done. Cases: mixed
// sizes (0 elements, a scalar, 7, 1023 as [3,11,31], 65537), in place and
// not; every op on int32, float16, float32, float64; a group of one; members
// of different dtypes (reduced, or refused at once); prescale and postscale; groups and plain
// allreduces submitted together in a per-rank random order; the same group names over several steps
// (the response cache). Inputs differ by rank, member and step, and the expected elements are
// folded here in closed form (ReduceSpec in mpi_test_util).
//
// Atomicity: with one rank late (sleeping 200 ms, sequenced by MPI_Barrier),
// the other ranks' handle of the group must still be pending after they
// submitted it, and stay pending while an unrelated allreduce completes, until
// the late rank submits the group; then every rank's result must be right.
// Barrier: rank (r + round) % p sleeps r * 50 ms first; no rank may leave
// barrier() before the last one entered it (entry and exit times on the
// machine's monotonic clock, gathered with MPI after the barrier).
// Run by ctest under mpiexec at 1..3 ranks.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;
using Shape = std::vector<int64_t>;

struct Job {
  Recorder& rec;
  int rank;
  int size;
  std::mt19937 rng;
};

struct Member {
  std::string name;
  DataType dtype = DataType::kFloat32;
  Shape shape;
  bool in_place = false;
  uint64_t salt = 0;
  std::vector<uint64_t> input;
  std::vector<uint64_t> output;  // unused in place

  void* out() { return in_place ? input.data() : output.data(); }
};

// One grouped_allreduce (or, with `plain`, one allreduce of its one member).
struct Group {
  std::string label;
  ReduceOp op = ReduceOp::kSum;
  double prescale = 1.0;
  double postscale = 1.0;
  bool plain = false;
  // herd.h leaves open whether members may differ in dtype: such a group
  // must either reduce correctly or be refused at once, naming the dtypes.
  bool may_refuse = false;
  bool refused = false;
  std::vector<Member> members;
  herd::Handle handle;
  std::string error;

  ReduceSpec spec(const Member& m) const {
    ReduceSpec s;
    s.dtype = m.dtype;
    s.op = op;
    s.prescale = prescale;
    s.postscale = postscale;
    s.salt = m.salt;
    return s;
  }
};

// Members named <label>/m<i>; salts depend on `step`.
Group make_group(const std::string& label, ReduceOp op, const std::vector<DataType>& dtypes,
                 const std::vector<Shape>& shapes, uint64_t step) {
  Group g;
  g.label = label;
  g.op = op;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    Member m;
    m.name = label + "/m" + std::to_string(i);
    m.dtype = dtypes[i % dtypes.size()];
    m.shape = shapes[i];
    m.in_place = i % 2 == 1;
    m.salt = mix64(std::hash<std::string>()(m.name)) + step;
    g.members.push_back(std::move(m));
  }
  return g;
}

void prepare(Group& g, const Job& job) {
  for (Member& m : g.members) {
    const int64_t count = num_elements(m.shape);
    m.input = storage_for(m.dtype, count);
    if (!m.in_place) m.output.assign(m.input.size(), 0xdedededededededeULL);
    const ReduceSpec spec = g.spec(m);
    for (int64_t i = 0; i < count; ++i) {
      store_value(m.dtype, m.input.data(), i, reduce_input(spec, job.rank, job.size, i));
    }
  }
}

void submit(Group& g) {
  std::vector<std::string> names;
  std::vector<herd::TensorView> inputs;
  std::vector<herd::TensorView> outputs;
  for (Member& m : g.members) {
    names.push_back(m.name);
    inputs.push_back({m.input.data(), m.dtype, m.shape});
    outputs.push_back({m.out(), m.dtype, m.shape});
  }
  try {
    if (g.plain) {
      g.handle =
          herd::allreduce_async(names[0], inputs[0], outputs[0], g.op, g.prescale, g.postscale);
    } else {
      g.handle =
          herd::grouped_allreduce_async(names, inputs, outputs, g.op, g.prescale, g.postscale);
    }
  } catch (const herd::Error& e) {
    g.refused = g.may_refuse && std::string(e.what()).find("dtype") != std::string::npos;
    if (!g.refused) g.error = std::string("submission threw: ") + e.what();
    static bool noted = false;  // say once which way herd went
    if (g.refused && herd::rank() == 0 && !noted) {
      noted = true;
      std::printf("%s refused at once: %s\n", g.label.c_str(), e.what());
    }
  }
}

void wait_and_check(Group& g, const Job& job, const std::string& batch) {
  if (g.error.empty() && g.handle.valid()) {
    try {
      herd::wait(g.handle);
    } catch (const herd::Error& e) {
      g.error = std::string("wait threw: ") + e.what();
    }
  }
  for (Member& m : g.members) {
    CaseCheck c(job.rec, batch + " " + (g.plain ? "allreduce " : "group ") + g.label + " " +
                             m.name + " " + dtype_name(m.dtype) + " " + op_name(g.op));
    if (!g.error.empty()) {
      c.fail(g.error);
      continue;
    }
    if (g.refused) continue;  // refused at once, as allowed
    const ReduceSpec spec = g.spec(m);
    for (int64_t i = 0; i < num_elements(m.shape); ++i) {
      const double expected = reduce_expected(spec, job.size, i);
      const double actual = load_value(m.dtype, m.out(), i);
      if (!(std::fabs(actual - expected) <= reduce_tolerance(spec, job.size, expected))) {
        c.mismatch(i, double_string(expected), double_string(actual));
      }
    }
    for (int64_t i = 0; i < num_elements(m.shape) && !m.in_place; ++i) {
      if (load_value(m.dtype, m.input.data(), i) != reduce_input(spec, job.rank, job.size, i)) {
        c.fail("input element " + std::to_string(i) + " was modified");
        break;
      }
    }
  }
}

void run_batch(Job& job, const std::string& batch, std::vector<Group> groups) {
  for (Group& g : groups) prepare(g, job);
  std::vector<std::size_t> order(groups.size());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), job.rng);
  for (std::size_t i : order) submit(groups[i]);
  for (std::size_t i : order) wait_and_check(groups[i], job, batch);
}

std::vector<Group> batch_groups(uint64_t step) {
  const DataType f32 = DataType::kFloat32;
  std::vector<Group> groups;
  groups.push_back(make_group("mixed_sizes", ReduceOp::kSum, {f32},
                              {{4, 0}, {}, {7}, {3, 11, 31}, {65537}}, step));
  for (DataType dtype : {DataType::kInt16, DataType::kInt32, DataType::kFloat16, DataType::kFloat32,
                         DataType::kFloat64}) {
    for (ReduceOp op :
         {ReduceOp::kSum, ReduceOp::kAverage, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
      groups.push_back(make_group("ops/" + dtype_name(dtype) + "/" + op_name(op), op, {dtype},
                                  {{1}, {7}, {2, 500}}, step));
    }
  }
  groups.push_back(
      make_group("one/float64_max", ReduceOp::kMax, {DataType::kFloat64}, {{13}}, step));
  groups.push_back(make_group("one/int8_scalar", ReduceOp::kSum, {DataType::kInt8}, {{}}, step));
  Group mixed = make_group("mixed_dtypes", ReduceOp::kSum,
                           {DataType::kInt64, DataType::kFloat16, DataType::kUInt8, f32},
                           {{5}, {9}, {3, 3}, {0}}, step);
  mixed.may_refuse = true;
  groups.push_back(std::move(mixed));
  for (DataType dtype : {f32, DataType::kInt32}) {
    Group scaled =
        make_group("scaled/" + dtype_name(dtype), ReduceOp::kSum, {dtype}, {{7}, {100}}, step);
    scaled.prescale = 0.5;
    scaled.postscale = 4;
    groups.push_back(std::move(scaled));
  }
  for (int k = 0; k < 3; ++k) {
    Group plain = make_group("plain" + std::to_string(k), ReduceOp::kSum, {f32}, {{11 + k}}, step);
    plain.plain = true;
    groups.push_back(std::move(plain));
  }
  return groups;
}

bool poll_for(const herd::Handle& handle, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!herd::poll(handle)) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Rank `late` submits the group only after the others have submitted it,
// waited 200 ms, seen it pending, and completed an unrelated allreduce.
void test_atomic(Job& job, int late) {
  const std::string label = "atomic/late" + std::to_string(late);
  const std::string case_name = "atomicity " + label;
  const bool early = job.rank != late;
  Group g = make_group(label, ReduceOp::kSum, {DataType::kInt32}, {{5}, {1000}, {1}}, 0);
  Group other = make_group(label + "/other", ReduceOp::kSum, {DataType::kFloat32}, {{8}}, 0);
  other.plain = true;
  prepare(g, job);
  prepare(other, job);
  MPI_Barrier(MPI_COMM_WORLD);
  if (early) {
    submit(g);
  } else {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  MPI_Barrier(MPI_COMM_WORLD);  // the early ranks submitted 200 ms ago; `late` did not
  const std::string not_yet = " before rank " + std::to_string(late) + " submitted it";
  if (early && g.handle.valid()) {
    job.rec.check(!herd::poll(g.handle), case_name, "group complete" + not_yet);
  }
  submit(other);
  if (other.handle.valid()) {
    job.rec.check(poll_for(other.handle, 30), case_name,
                  "an unrelated allreduce did not complete within 30 s while the group waited");
  }
  if (early && g.handle.valid()) {
    job.rec.check(!herd::poll(g.handle), case_name,
                  "group complete after an unrelated allreduce," + not_yet);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (!early) submit(g);
  wait_and_check(g, job, "atomicity");
  wait_and_check(other, job, "atomicity");
}

// --- barrier ----------------------------------------------------------------

double now_seconds() {  // CLOCK_MONOTONIC: one clock for every process on the machine
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Rank (r + round) % p sleeps r * 50 ms before barrier(); afterwards every
// rank's exit time must be no earlier than the last entry (1 ms slack).
void test_barrier(Job& job) {
  for (int round = 0; round < 3; ++round) {
    const int delay_ms = ((job.rank + round) % job.size) * 50;
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    double times[2] = {now_seconds(), 0};
    std::string error;
    try {
      herd::barrier();
    } catch (const herd::Error& e) {
      error = e.what();
    }
    times[1] = now_seconds();
    std::vector<double> all(2 * job.size);
    MPI_Allgather(times, 2, MPI_DOUBLE, all.data(), 2, MPI_DOUBLE, MPI_COMM_WORLD);
    double last_enter = 0;
    int last = 0;
    for (int r = 0; r < job.size; ++r) {
      if (all[2 * r] > last_enter) last = r;
      last_enter = std::max(last_enter, all[2 * r]);
    }
    const std::string name = "barrier round" + std::to_string(round);
    if (!error.empty()) {
      job.rec.fail(name, "barrier threw: " + error);
      continue;
    }
    job.rec.check(times[1] >= last_enter - 1e-3, name,
                  "left " + double_string((last_enter - times[1]) * 1e3) + " ms before rank " +
                      std::to_string(last) + " entered");
  }
}

}  // namespace

int main() {
  if (!init_herd("test_grouped")) return 1;
  const int rank = herd::rank();
  Recorder rec("test_grouped", rank);
  Job job{rec, rank, herd::size(), std::mt19937(static_cast<unsigned>(rank) + 5)};
  try {
    for (uint64_t step = 0; step < 3; ++step) {
      run_batch(job, "step" + std::to_string(step), batch_groups(step));
    }
    if (job.size > 1) {
      test_atomic(job, job.size - 1);
      test_atomic(job, 0);
    }
    test_barrier(job);
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
