// The collectives on caller-owned buffers, and the handle Python waits on.
//
// Each *_async call submits at once and returns a Handle. Results whose size
// only the negotiation decides (allgather, alltoall, reducescatter) land in a
// herd::Tensor the handle owns; Python reads it without a copy through the
// buffer protocol (numpy.frombuffer, torch.frombuffer), and the buffer keeps
// the Tensor alive for as long as any array made from it.
#include <pybind11/stl.h>

#include <memory>
#include <mutex>

#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {
namespace {

// Outputs of operations whose Python handle died before they completed: the
// background thread still writes into them, so they stay here until done.
class AbandonedOutputs {
 public:
  void keep(Handle handle, std::shared_ptr<Tensor> output,
            std::shared_ptr<std::vector<int64_t>> received_splits) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<Entry> still_running;
    for (Entry& entry : entries_) {
      if (!herd::poll(entry.handle)) still_running.push_back(std::move(entry));
    }
    still_running.push_back({std::move(handle), std::move(output), std::move(received_splits)});
    entries_ = std::move(still_running);
  }

 private:
  struct Entry {
    Handle handle;
    std::shared_ptr<Tensor> output;
    std::shared_ptr<std::vector<int64_t>> received_splits;
  };
  std::mutex mutex_;
  std::vector<Entry> entries_;
};

AbandonedOutputs& abandoned_outputs() {
  static auto* outputs = new AbandonedOutputs();  // never destroyed: outlives every handle
  return *outputs;
}

// One submitted operation. Owns what the background thread writes into
// (output tensor, received splits) until the operation completes and Python
// has taken them.
struct PendingOperation {
  Handle handle;
  std::shared_ptr<Tensor> output;
  std::shared_ptr<std::vector<int64_t>> received_splits;

  PendingOperation() = default;
  PendingOperation(PendingOperation&&) = default;
  PendingOperation& operator=(PendingOperation&&) = delete;
  PendingOperation(const PendingOperation&) = delete;
  ~PendingOperation() {
    if (handle.valid() && output && !herd::poll(handle)) {
      abandoned_outputs().keep(handle, std::move(output), std::move(received_splits));
    }
  }

  bool poll() const { return herd::poll(handle); }
  void wait() const { herd::wait(handle); }
  std::shared_ptr<Tensor> result() const {
    if (!output) throw py::value_error("herd: this operation writes into the caller's tensor");
    if (!herd::poll(handle)) throw py::value_error("herd: the operation has not completed yet");
    return output;
  }
};

std::vector<TensorView> make_views(const std::vector<std::uintptr_t>& addresses,
                                   const std::vector<std::string>& dtypes,
                                   const std::vector<std::vector<int64_t>>& shapes) {
  if (addresses.size() != dtypes.size() || addresses.size() != shapes.size()) {
    throw py::value_error("herd: " + std::to_string(addresses.size()) + " addresses, " +
                          std::to_string(dtypes.size()) + " dtypes and " +
                          std::to_string(shapes.size()) +
                          " shapes; expected one of each per tensor");
  }
  std::vector<TensorView> views;
  views.reserve(addresses.size());
  for (std::size_t i = 0; i < addresses.size(); ++i) {
    views.push_back(make_view(addresses[i], dtypes[i], shapes[i]));
  }
  return views;
}

std::string dtype_of(const Tensor& tensor) { return to_string(tensor.dtype()); }

void bind_result_tensor(py::module_& m) {
  py::class_<Tensor, std::shared_ptr<Tensor>>(m, "Tensor", py::buffer_protocol(),
                                              "A result herd allocated: raw bytes, dtype, shape.")
      .def_property_readonly("dtype", &dtype_of)
      .def_property_readonly("shape", &Tensor::shape)
      .def_property_readonly("nbytes", &Tensor::num_bytes)
      // Bytes, one dimension: numpy.frombuffer / torch.frombuffer then give
      // the dtype, which NumPy lacks for bfloat16.
      .def_buffer([](Tensor& tensor) {
        return py::buffer_info(tensor.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(tensor.num_bytes())}, {1});
      });
}

void bind_pending_operation(py::module_& m) {
  py::class_<PendingOperation>(m, "Handle", "One submitted operation.")
      .def("poll", &PendingOperation::poll, "True once the operation has completed; never blocks.")
      .def("wait", &PendingOperation::wait, py::call_guard<py::gil_scoped_release>(),
           "Blocks (without the GIL) until the operation completes; raises herd.Error if it "
           "failed.")
      .def("result", &PendingOperation::result,
           "The Tensor herd allocated for allgather, alltoall or reducescatter.")
      .def(
          "received_splits",
          [](const PendingOperation& op) {
            if (!op.received_splits) throw py::value_error("herd: only alltoall receives splits");
            return *op.received_splits;
          },
          "Rows each rank sent here (alltoall).");
}

}  // namespace

void bind_collectives(py::module_& m) {
  bind_result_tensor(m);
  bind_pending_operation(m);

  m.def(
      "allreduce_async",
      [](const std::string& name, std::uintptr_t input, std::uintptr_t output,
         const std::string& dtype, const std::vector<int64_t>& shape, ReduceOp op, double prescale,
         double postscale, int process_set_id) {
        PendingOperation pending;
        pending.handle =
            allreduce_async(name, make_view(input, dtype, shape), make_view(output, dtype, shape),
                            op, prescale, postscale, find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("output"), py::arg("dtype"), py::arg("shape"),
      py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
      py::arg("process_set_id") = 0);

  m.def(
      "grouped_allreduce_async",
      [](const std::vector<std::string>& names, const std::vector<std::uintptr_t>& inputs,
         const std::vector<std::uintptr_t>& outputs, const std::vector<std::string>& dtypes,
         const std::vector<std::vector<int64_t>>& shapes, ReduceOp op, double prescale,
         double postscale, int process_set_id) {
        PendingOperation pending;
        pending.handle = grouped_allreduce_async(names, make_views(inputs, dtypes, shapes),
                                                 make_views(outputs, dtypes, shapes), op, prescale,
                                                 postscale, find_process_set(process_set_id));
        return pending;
      },
      py::arg("names"), py::arg("inputs"), py::arg("outputs"), py::arg("dtypes"), py::arg("shapes"),
      py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
      py::arg("process_set_id") = 0);

  m.def(
      "allgather_async",
      [](const std::string& name, std::uintptr_t input, const std::string& dtype,
         const std::vector<int64_t>& shape, int process_set_id) {
        PendingOperation pending;
        pending.output = std::make_shared<Tensor>();
        pending.handle = allgather_async(name, make_view(input, dtype, shape), pending.output.get(),
                                         find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
      py::arg("process_set_id") = 0);

  m.def(
      "broadcast_async",
      [](const std::string& name, std::uintptr_t inout, const std::string& dtype,
         const std::vector<int64_t>& shape, int root, int process_set_id) {
        PendingOperation pending;
        pending.handle = broadcast_async(name, make_view(inout, dtype, shape), root,
                                         find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("inout"), py::arg("dtype"), py::arg("shape"), py::arg("root"),
      py::arg("process_set_id") = 0);

  m.def(
      "alltoall_async",
      [](const std::string& name, std::uintptr_t input, const std::string& dtype,
         const std::vector<int64_t>& shape, std::vector<int64_t> splits, int process_set_id) {
        PendingOperation pending;
        pending.output = std::make_shared<Tensor>();
        pending.received_splits = std::make_shared<std::vector<int64_t>>();
        pending.handle = alltoall_async(name, make_view(input, dtype, shape), std::move(splits),
                                        pending.output.get(), pending.received_splits.get(),
                                        find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
      py::arg("splits") = std::vector<int64_t>{}, py::arg("process_set_id") = 0);

  m.def(
      "reducescatter_async",
      [](const std::string& name, std::uintptr_t input, const std::string& dtype,
         const std::vector<int64_t>& shape, ReduceOp op, double prescale, double postscale,
         int process_set_id) {
        PendingOperation pending;
        pending.output = std::make_shared<Tensor>();
        pending.handle =
            reducescatter_async(name, make_view(input, dtype, shape), pending.output.get(), op,
                                prescale, postscale, find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("op"),
      py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("process_set_id") = 0);
}

}  // namespace herd::python
