// herd::SharedBuffer through the whole runtime: gradients of odd sizes as
// views into one SharedBuffer, allreduced in place together (fused into one
// range of the buffer, the shared-memory allreduce's direct path), over
// several rounds; one large tensor out of place between two SharedBuffers;
// a mix where only rank 0's buffer is shared (the other paths); a buffer
// released and another allocated between rounds; and the type's own
// contract (zeroed, moved, empty). Sums of small integers, exact in float
// whatever the order, against their closed forms.
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "herd/herd.h"
#include "mpi_test_util.h"

namespace {

using herd::DataType;
using herd::ReduceOp;
using herd::SharedBuffer;
using herd::TensorView;
using namespace herd_test;

// Rank r's value at element i of tensor t in round k, and its sum over p
// ranks.
float value(int rank, int tensor, int64_t i, int round) {
  return static_cast<float>((i + tensor * 3 + round + rank) % 32);
}
float sum(int ranks, int tensor, int64_t i, int round) {
  float total = 0;
  for (int r = 0; r < ranks; ++r) total += value(r, tensor, i, round);
  return total;
}

void check_values(Recorder& rec, const std::string& name, const float* data, int64_t count,
                  int tensor, int round, int ranks) {
  CaseCheck check(rec, name);
  for (int64_t i = 0; i < count; ++i) {
    const float want = sum(ranks, tensor, i, round);
    if (data[i] != want) check.mismatch(i, std::to_string(want), std::to_string(data[i]));
  }
}

// Tensors of `counts` laid one after the other in `arena` (or on the heap
// where not `shared`), reduced in place, submitted in reverse like a
// backward pass.
void reduce_arena(Recorder& rec, const std::string& name, const std::vector<int64_t>& counts,
                  bool shared, int round) {
  const int rank = herd::rank();
  const int ranks = herd::size();
  int64_t total = 0;
  for (const int64_t count : counts) total += count;
  SharedBuffer arena(shared ? static_cast<std::size_t>(total) * sizeof(float) : 0);
  std::vector<float> heap(shared ? 0 : static_cast<std::size_t>(total));
  float* base = shared ? static_cast<float*>(arena.data()) : heap.data();
  std::vector<float*> tensors;
  for (std::size_t t = 0, at = 0; t < counts.size(); at += static_cast<std::size_t>(counts[t++])) {
    tensors.push_back(base + at);
    for (int64_t i = 0; i < counts[t]; ++i) {
      tensors.back()[i] = value(rank, static_cast<int>(t), i, round);
    }
  }
  std::vector<herd::Handle> handles;
  for (std::size_t t = counts.size(); t-- > 0;) {
    const TensorView view{tensors[t], DataType::kFloat32, {counts[t]}};
    handles.push_back(
        herd::allreduce_async(name + "/" + std::to_string(t), view, view, ReduceOp::kSum));
  }
  for (const herd::Handle& handle : handles) herd::wait(handle);
  for (std::size_t t = 0; t < counts.size(); ++t) {
    check_values(rec, name + " tensor " + std::to_string(t), tensors[t], counts[t],
                 static_cast<int>(t), round, ranks);
  }
}

void test_contract(Recorder& rec) {
  SharedBuffer empty;
  rec.check(empty.data() == nullptr && empty.size() == 0, "empty", "a default buffer holds memory");
  SharedBuffer buffer(10000);
  const auto* bytes = static_cast<const uint8_t*>(buffer.data());
  bool zero = buffer.size() == 10000;
  for (std::size_t i = 0; i < buffer.size(); ++i) zero = zero && bytes[i] == 0;
  rec.check(zero, "zeroed", "not 10000 zero bytes");
  void* data = buffer.data();
  SharedBuffer moved(std::move(buffer));
  rec.check(moved.data() == data && moved.size() == 10000 && buffer.data() == nullptr &&
                buffer.size() == 0,
            "moved", "the move did not hand the memory over");
  buffer = std::move(moved);
  rec.check(buffer.data() == data && moved.data() == nullptr, "move-assigned",
            "the assignment did not hand the memory over");
}

}  // namespace

int main() {
  if (!init_herd("test_shared_buffer")) return 1;
  const int rank = herd::rank();
  const int ranks = herd::size();
  Recorder rec("test_shared_buffer", rank);
  try {
    test_contract(rec);
    // Odd counts, from below the direct path's minimum to several of its
    // chunks in all.
    const std::vector<int64_t> counts = {1, 1000, 65536 + 7, 3, 1 << 20, 250001, 17};
    for (int round = 0; round < 3; ++round) {
      // A new arena each round: released, another at the same fd.
      reduce_arena(rec, "arena round " + std::to_string(round), counts, true, round);
    }
    // Only rank 0's arena is shared: every rank takes the other paths.
    reduce_arena(rec, "mixed", counts, rank == 0, 3);
    // One tensor out of place, between two shared buffers.
    const int64_t count = (3 << 20) + 5;
    SharedBuffer input(static_cast<std::size_t>(count) * sizeof(float));
    SharedBuffer output(static_cast<std::size_t>(count) * sizeof(float));
    auto* in = static_cast<float*>(input.data());
    for (int64_t i = 0; i < count; ++i) in[i] = value(rank, 0, i, 4);
    herd::allreduce("out of place", TensorView{in, DataType::kFloat32, {count}},
                    TensorView{output.data(), DataType::kFloat32, {count}}, ReduceOp::kSum);
    check_values(rec, "out of place", static_cast<const float*>(output.data()), count, 0, 4, ranks);
    CaseCheck unchanged(rec, "out of place input unchanged");
    for (int64_t i = 0; i < count; ++i) {
      if (in[i] != value(rank, 0, i, 4)) {
        unchanged.mismatch(i, std::to_string(value(rank, 0, i, 4)), std::to_string(in[i]));
      }
    }
  } catch (const std::exception& e) {
    rec.fail("main", std::string("threw: ") + e.what());
  }
  const int code = rec.finish();
  return shutdown_herd(rec) ? code : 1;
}
