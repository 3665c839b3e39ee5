// How GPU views are refused where they cannot run, on any machine: in a build
// without CUDA ("this build of herd has no GPU support"), in a build with
// CUDA on a machine without a usable GPU ("can use no CUDA device"), and, on
// a machine with one, views that are not this rank's GPU memory (a device
// index out of range, host memory labelled as GPU memory) and GPU tensors on
// a process set other than the global one. Also the checks
// that hold everywhere: an allreduce's input and output on different devices,
// a grouped allreduce with members on different devices, and herd::Tensor on
// a GPU where there is none. Each refusal is a herd::Error thrown by the
// submitting call, on the calling rank only, so the job goes on: a CPU
// allreduce after them must still work.
#include <mpi.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "herd/herd.h"
#include "herd/tensor.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::Device;
using herd::ReduceOp;
using herd::TensorView;
using namespace herd_test;

// The call must throw herd::Error whose text contains every one of `parts`.
void expect_error(Recorder& rec, const std::string& case_name,
                  const std::vector<std::string>& parts, const std::function<void()>& call) {
  try {
    call();
    rec.fail(case_name, "no exception; expected herd::Error containing \"" + parts.front() + "\"");
  } catch (const herd::Error& e) {
    const std::string text = e.what();
    for (const std::string& part : parts) {
      rec.check(text.find(part) != std::string::npos, case_name,
                "message \"" + text + "\" lacks \"" + part + "\"");
    }
  } catch (const std::exception& e) {
    rec.fail(case_name, std::string("threw a non-herd::Error: ") + e.what());
  }
}

// Whether a GPU is usable here: allocating on gpu:0 works.
bool gpu_usable() {
  if (!herd::cuda_built()) return false;
  try {
    herd::Tensor probe(DataType::kFloat32, {1}, Device::gpu(0));
    return true;
  } catch (const herd::Error&) {
    return false;
  }
}

void test_refusals(Recorder& rec, int rank) {
  std::vector<float> host(8, 1.0f);
  const TensorView on_cpu{host.data(), DataType::kFloat32, {8}};
  // Host memory labelled as gpu:0: refused whatever the build and machine.
  const TensorView labelled_gpu{host.data(), DataType::kFloat32, {8}, Device::gpu(0)};
  const bool usable = gpu_usable();
  std::printf("test_gpu_refusal rank %d: cuda_built %d, nccl_built %d, GPU usable %d\n", rank,
              herd::cuda_built() ? 1 : 0, herd::nccl_built() ? 1 : 0, usable ? 1 : 0);

  std::vector<std::string> why;
  if (!herd::cuda_built()) {
    why = {"allreduce 'labelled'", "input is on gpu:0", "this build of herd has no GPU support"};
  } else if (!usable) {
    why = {"allreduce 'labelled'", "input is on gpu:0", "rank " + std::to_string(rank),
           "can use no CUDA device"};
  } else {
    why = {"allreduce 'labelled'", "input claims to be on gpu:0", "is host memory"};
  }
  expect_error(rec, "host memory labelled gpu", why,
               [&] { herd::allreduce("labelled", labelled_gpu, labelled_gpu, ReduceOp::kSum); });

  expect_error(rec, "input and output on different devices",
               {"allreduce 'split'", "input is on cpu but output on gpu:0",
                "both must be on the same device"},
               [&] { herd::allreduce("split", on_cpu, labelled_gpu, ReduceOp::kSum); });

  std::vector<float> other(8, 2.0f);
  const TensorView other_cpu{other.data(), DataType::kFloat32, {8}};
  expect_error(rec, "grouped members on different devices",
               {"members are on different devices", "'g0' cpu", "'g1' gpu:0"}, [&] {
                 herd::grouped_allreduce({"g0", "g1"}, {on_cpu, labelled_gpu},
                                         {other_cpu, labelled_gpu}, ReduceOp::kSum);
               });

  expect_error(rec, "broadcast of host memory labelled gpu", {"broadcast 'b'", "gpu:0"},
               [&] { herd::broadcast("b", labelled_gpu, 0); });

  if (!usable) {
    // No GPU: a Tensor cannot be made there either.
    expect_error(rec, "tensor on a missing gpu",
                 {"cannot allocate 32 bytes on gpu:0", herd::cuda_built() ? "" : "no GPU support"},
                 [] { herd::Tensor tensor(DataType::kFloat32, {8}, Device::gpu(0)); });
  } else {
    // A device index past the last one.
    herd::Tensor device_memory(DataType::kFloat32, {8}, Device::gpu(0));
    TensorView past = device_memory.view();
    past.device = Device::gpu(4096);
    expect_error(rec, "device index out of range", {"input is on gpu:4096", "CUDA device(s)"},
                 [&] { herd::allreduce("past", past, past, ReduceOp::kSum); });

    // GPU tensors run on the global process set only. Every rank sees the
    // same machine, so every rank takes this branch and adds the set.
    std::vector<int> everyone;
    for (int r = 0; r < herd::size(); ++r) everyone.push_back(r);
    const herd::ProcessSet set = herd::add_process_set(everyone);
    const TensorView on_gpu = device_memory.view();
    expect_error(rec, "gpu tensor on a process set",
                 {"allreduce 'on set'", "GPU tensors run on the global process set only",
                  "this is process set " + std::to_string(set.id())},
                 [&] { herd::allreduce("on set", on_gpu, on_gpu, ReduceOp::kSum, 1.0, 1.0, set); });
    herd::remove_process_set(set);
  }

  // The refusals left nothing pending: the names and the job still work.
  for (float& v : host) v = static_cast<float>(rank + 1);
  herd::allreduce("labelled", on_cpu, on_cpu, ReduceOp::kSum);
  const int size = herd::size();
  const float expected = static_cast<float>(size * (size + 1) / 2);
  CaseCheck c(rec, "cpu allreduce after the refusals");
  for (int i = 0; i < 8; ++i) {
    if (host[i] != expected) c.mismatch(i, std::to_string(expected), std::to_string(host[i]));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const MpiWorld world = init_mpi(&argc, &argv);
  Recorder rec("test_gpu_refusal", world.rank);
  try {
    herd::init();
    test_refusals(rec, world.rank);
    herd::shutdown();
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  return finish_program_owned_mpi(rec);
}
