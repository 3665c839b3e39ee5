// One-rank test of herd's life cycle edges: every call before init() throws
// herd::Error; a bad HERD_* setting fails init() with a herd::Error naming the
// variable and its value and leaves herd uninitialized; once the setting is
// gone, init() works, an allreduce works, and shutdown() ends it. The program
// starts MPI itself: a failed init that had started MPI would finalize it,
// and herd could not start again in this process.
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using namespace herd_test;

void expect_calls_throw(Recorder& rec, const std::string& case_name) {
  std::vector<float> data(4, 1.0f);
  const herd::TensorView view{data.data(), DataType::kFloat32, {4}};
  expect_throws(rec, case_name, "rank()", [] { herd::rank(); });
  expect_throws(rec, case_name, "size()", [] { herd::size(); });
  expect_throws(rec, case_name, "local_rank()", [] { herd::local_rank(); });
  expect_throws(rec, case_name, "local_size()", [] { herd::local_size(); });
  expect_throws(rec, case_name, "cross_rank()", [] { herd::cross_rank(); });
  expect_throws(rec, case_name, "cross_size()", [] { herd::cross_size(); });
  expect_throws(rec, case_name, "mpi_threads_supported()", [] { herd::mpi_threads_supported(); });
  expect_throws(rec, case_name, "allreduce_async()",
                [&] { herd::allreduce_async("x", view, view, ReduceOp::kSum); });
  expect_throws(rec, case_name, "allreduce()",
                [&] { herd::allreduce("x", view, view, ReduceOp::kSum); });
  expect_throws(rec, case_name, "shutdown()", [] { herd::shutdown(); });
  rec.check(!herd::is_initialized(), case_name, "is_initialized() is true");
}

// init() with `variable`=`value` must throw naming both. Returns false if
// init succeeded (herd is then running and the test cannot go on).
bool expect_bad_setting(Recorder& rec, const char* variable, const char* value) {
  const std::string case_name = std::string("init with ") + variable + "=" + value;
  setenv(variable, value, 1);
  bool threw = false;
  try {
    herd::init();
    rec.fail(case_name, "init did not throw");
  } catch (const herd::Error& e) {
    threw = true;
    const std::string message = e.what();
    rec.check(
        message.find(variable) != std::string::npos && message.find(value) != std::string::npos,
        case_name, "message does not name the variable and value: \"" + message + "\"");
  } catch (const std::exception& e) {
    rec.fail(case_name, std::string("threw a non-herd::Error: ") + e.what());
  }
  unsetenv(variable);
  if (threw) expect_calls_throw(rec, "after " + case_name);
  return threw;
}

// int32 sum on one rank with prescale 0.5: truncation toward zero, so the
// result is exact and known in closed form.
void expect_allreduce_works(Recorder& rec) {
  const std::vector<int32_t> input = {-7, -5, -3, -2, -1, 0, 1, 2, 3, 5, 7};
  const std::vector<int32_t> expected = {-3, -2, -1, -1, 0, 0, 0, 1, 1, 2, 3};
  std::vector<int32_t> output(input.size(), 99);
  std::vector<int32_t> in = input;
  const int64_t n = static_cast<int64_t>(input.size());
  CaseCheck c(rec, "allreduce after good init");
  try {
    herd::allreduce("ok", {in.data(), DataType::kInt32, {n}},
                    {output.data(), DataType::kInt32, {n}}, ReduceOp::kSum, 0.5, 1.0);
  } catch (const herd::Error& e) {
    c.fail(std::string("threw: ") + e.what());
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (output[i] != expected[i])
      c.mismatch(i, std::to_string(expected[i]), std::to_string(output[i]));
    if (in[i] != input[i])
      c.mismatch(i, "input " + std::to_string(input[i]), "input " + std::to_string(in[i]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_init_errors", world.rank);
  unsetenv("HERD_FUSION_THRESHOLD");
  unsetenv("HERD_CYCLE_TIME");
  expect_calls_throw(rec, "before init");
  if (!expect_bad_setting(rec, "HERD_FUSION_THRESHOLD", "abc") ||
      !expect_bad_setting(rec, "HERD_CYCLE_TIME", "-1")) {
    herd::shutdown();
    return finish_program_owned_mpi(rec);
  }
  try {
    herd::init();
    rec.check(herd::is_initialized(), "good init", "is_initialized() is false");
    rec.check(herd::rank() == 0 && herd::size() == 1, "good init", "rank/size are not 0/1");
    rec.check(herd::local_rank() == 0 && herd::local_size() == 1, "good init",
              "local_rank/local_size are not 0/1");
    rec.check(herd::cross_rank() == 0 && herd::cross_size() == 1, "good init",
              "cross_rank/cross_size are not 0/1");
    rec.check(herd::mpi_threads_supported(), "good init", "mpi_threads_supported() is false");
    expect_allreduce_works(rec);
    herd::shutdown();
    rec.pass();
  } catch (const herd::Error& e) {
    rec.fail("good init", std::string("threw: ") + e.what());
  }
  expect_throws(rec, "after shutdown", "rank()", [] { herd::rank(); });
  return finish_program_owned_mpi(rec);
}
