// The collectives on caller-owned buffers, and the handle Python waits on.
//
// Each *_async call submits at once and returns a Handle. Results whose size
// only the negotiation decides (allgather, alltoall, reducescatter) land in a
// herd::Tensor the handle owns, on the input's device. Python reads one in
// host memory without a copy through the buffer protocol (numpy.frombuffer,
// torch.frombuffer), one on a GPU through __cuda_array_interface__
// (torch.as_tensor, cupy.asarray); either way the array made from it holds a
// reference to the Tensor, which lives as long as that array.
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

// One view per tensor; empty `devices` and `streams` put every tensor in host
// memory.
std::vector<TensorView> make_views(const std::vector<std::uintptr_t>& addresses,
                                   const std::vector<std::string>& dtypes,
                                   const std::vector<std::vector<int64_t>>& shapes,
                                   const std::vector<int>& devices,
                                   const std::vector<std::uintptr_t>& streams) {
  const std::size_t count = addresses.size();
  if (dtypes.size() != count || shapes.size() != count ||
      (!devices.empty() && devices.size() != count) ||
      (!streams.empty() && streams.size() != count)) {
    throw py::value_error(
        "herd: " + std::to_string(count) + " addresses, " + std::to_string(dtypes.size()) +
        " dtypes, " + std::to_string(shapes.size()) + " shapes, " + std::to_string(devices.size()) +
        " devices and " + std::to_string(streams.size()) +
        " streams; expected one of each per tensor (devices and streams may "
        "be empty: all on the CPU)");
  }
  std::vector<TensorView> views;
  views.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    views.push_back(make_view(addresses[i], dtypes[i], shapes[i], devices.empty() ? -1 : devices[i],
                              streams.empty() ? 0 : streams[i]));
  }
  return views;
}

std::string dtype_of(const Tensor& tensor) { return to_string(tensor.dtype()); }

// The buffer protocol's entry (bf_getbuffer) for Tensor: its bytes, one
// dimension, as numpy.frombuffer / torch.frombuffer want them (the dtype is
// applied after, since NumPy lacks bfloat16). A Tensor in GPU memory is
// refused with BufferError: the protocol hands out host addresses. CPython
// calls this with the GIL held, and nothing may be thrown through it.
int get_tensor_buffer(PyObject* object, Py_buffer* view, int flags) {
  if (view == nullptr) {
    PyErr_SetString(PyExc_BufferError, "herd.Tensor: no view to fill");
    return -1;
  }
  view->obj = nullptr;  // what a refused request leaves behind
  const Tensor* tensor = nullptr;
  try {
    tensor = py::handle(object).cast<const Tensor*>();
  } catch (const std::exception& error) {
    PyErr_SetString(PyExc_BufferError, error.what());
    return -1;
  }
  if (tensor == nullptr) {
    PyErr_SetString(PyExc_BufferError, "herd.Tensor: no Tensor to take a buffer of");
    return -1;
  }
  if (tensor->device().type != DeviceType::kCPU) {
    const std::string device = to_string(tensor->device());
    PyErr_Format(PyExc_BufferError,
                 "herd.Tensor: this result is in the memory of %s, and the buffer protocol "
                 "hands out host memory only; read it through __cuda_array_interface__ "
                 "(torch.as_tensor(result, device='cuda:%d'), cupy.asarray) or copy it to the "
                 "host first",
                 device.c_str(), tensor->device().index);
    return -1;
  }
  // Fills a writable 1-D unsigned-byte view and takes a reference to `object`,
  // which keeps the Tensor alive until the buffer is released.
  return PyBuffer_FillInfo(view, object, const_cast<void*>(tensor->data()),
                           static_cast<Py_ssize_t>(tensor->num_bytes()), /*readonly=*/0, flags);
}

// __cuda_array_interface__ (version 3) of a Tensor on a GPU: shape, element
// code, (address, read-only=False), C-contiguous (strides None). "stream" is
// None, meaning the consumer need not synchronize: a Tensor reaches Python
// only once its operation completed, and herd::wait returns once the result
// is in the memory. A Tensor on the CPU has no such attribute
// (AttributeError, so hasattr() is False and consumers take the buffer).
py::dict cuda_array_interface(const Tensor& tensor) {
  if (tensor.device().type == DeviceType::kCPU) {
    throw py::attribute_error(
        "herd.Tensor: this result is in host memory and has no __cuda_array_interface__; "
        "use the buffer protocol (numpy.frombuffer, torch.frombuffer)");
  }
  py::tuple shape(tensor.shape().size());
  for (std::size_t i = 0; i < tensor.shape().size(); ++i) shape[i] = tensor.shape()[i];
  py::dict interface;
  interface["shape"] = shape;
  interface["typestr"] = array_typestr(tensor.dtype());
  interface["data"] =
      py::make_tuple(reinterpret_cast<std::uintptr_t>(tensor.data()), /*read_only=*/false);
  interface["strides"] = py::none();
  interface["stream"] = py::none();
  interface["version"] = 3;
  return interface;
}

void bind_result_tensor(py::module_& m) {
  // py::buffer_protocol() makes pybind11 give the type its buffer slots;
  // get_tensor_buffer then takes the place of pybind11's own entry, whose
  // callback cannot refuse a request (a C++ exception there would terminate).
  py::class_<Tensor, std::shared_ptr<Tensor>> tensor_class(
      m, "Tensor", py::buffer_protocol(),
      "A result herd allocated: raw bytes, dtype, shape, device. Read one in host memory "
      "with the buffer protocol, one on a GPU with __cuda_array_interface__.");
  auto* heap_type = reinterpret_cast<PyHeapTypeObject*>(tensor_class.ptr());
  heap_type->as_buffer.bf_getbuffer = &get_tensor_buffer;
  heap_type->as_buffer.bf_releasebuffer = nullptr;  // PyBuffer_FillInfo allocates nothing

  tensor_class
      .def(py::init([](const std::string& dtype, std::vector<int64_t> shape, int device) {
             for (int64_t extent : shape) {
               if (extent < 0) throw py::value_error("herd.Tensor: negative extent in the shape");
             }
             return std::make_shared<Tensor>(parse_dtype(dtype), std::move(shape),
                                             parse_device(device));
           }),
           py::arg("dtype"), py::arg("shape"), py::arg("device") = -1,
           "An uninitialized Tensor on the CPU (device -1) or that GPU, as herd allocates "
           "results; for tests. herd.Error when the device cannot be used.")
      .def_property_readonly("dtype", &dtype_of)
      .def_property_readonly("shape", &Tensor::shape)
      .def_property_readonly("nbytes", &Tensor::num_bytes)
      .def_property_readonly(
          "device", [](const Tensor& tensor) { return device_index(tensor.device()); },
          "-1 for host memory, else the GPU's ordinal.")
      .def_property_readonly("__cuda_array_interface__", &cuda_array_interface);
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

// Every collective takes its tensors' device (-1: the CPU) and stream address
// as its last arguments, after the process set; herd.numpy leaves them out.
void bind_collectives(py::module_& m) {
  bind_result_tensor(m);
  bind_pending_operation(m);

  m.def(
      "allreduce_async",
      [](const std::string& name, std::uintptr_t input, std::uintptr_t output,
         const std::string& dtype, const std::vector<int64_t>& shape, ReduceOp op, double prescale,
         double postscale, int process_set_id, int device, std::uintptr_t stream) {
        PendingOperation pending;
        pending.handle = allreduce_async(name, make_view(input, dtype, shape, device, stream),
                                         make_view(output, dtype, shape, device, stream), op,
                                         prescale, postscale, find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("output"), py::arg("dtype"), py::arg("shape"),
      py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
      py::arg("process_set_id") = 0, py::arg("device") = -1, py::arg("stream") = 0);

  m.def(
      "grouped_allreduce_async",
      [](const std::vector<std::string>& names, const std::vector<std::uintptr_t>& inputs,
         const std::vector<std::uintptr_t>& outputs, const std::vector<std::string>& dtypes,
         const std::vector<std::vector<int64_t>>& shapes, ReduceOp op, double prescale,
         double postscale, int process_set_id, const std::vector<int>& devices,
         const std::vector<std::uintptr_t>& streams) {
        PendingOperation pending;
        pending.handle =
            grouped_allreduce_async(names, make_views(inputs, dtypes, shapes, devices, streams),
                                    make_views(outputs, dtypes, shapes, devices, streams), op,
                                    prescale, postscale, find_process_set(process_set_id));
        return pending;
      },
      py::arg("names"), py::arg("inputs"), py::arg("outputs"), py::arg("dtypes"), py::arg("shapes"),
      py::arg("op"), py::arg("prescale") = 1.0, py::arg("postscale") = 1.0,
      py::arg("process_set_id") = 0, py::arg("devices") = std::vector<int>{},
      py::arg("streams") = std::vector<std::uintptr_t>{});

  m.def(
      "allgather_async",
      [](const std::string& name, std::uintptr_t input, const std::string& dtype,
         const std::vector<int64_t>& shape, int process_set_id, int device, std::uintptr_t stream) {
        PendingOperation pending;
        pending.output = std::make_shared<Tensor>();
        pending.handle = allgather_async(name, make_view(input, dtype, shape, device, stream),
                                         pending.output.get(), find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
      py::arg("process_set_id") = 0, py::arg("device") = -1, py::arg("stream") = 0);

  m.def(
      "broadcast_async",
      [](const std::string& name, std::uintptr_t inout, const std::string& dtype,
         const std::vector<int64_t>& shape, int root, int process_set_id, int device,
         std::uintptr_t stream) {
        PendingOperation pending;
        pending.handle = broadcast_async(name, make_view(inout, dtype, shape, device, stream), root,
                                         find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("inout"), py::arg("dtype"), py::arg("shape"), py::arg("root"),
      py::arg("process_set_id") = 0, py::arg("device") = -1, py::arg("stream") = 0);

  m.def(
      "alltoall_async",
      [](const std::string& name, std::uintptr_t input, const std::string& dtype,
         const std::vector<int64_t>& shape, std::vector<int64_t> splits, int process_set_id,
         int device, std::uintptr_t stream) {
        PendingOperation pending;
        pending.output = std::make_shared<Tensor>();
        pending.received_splits = std::make_shared<std::vector<int64_t>>();
        pending.handle = alltoall_async(
            name, make_view(input, dtype, shape, device, stream), std::move(splits),
            pending.output.get(), pending.received_splits.get(), find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"),
      py::arg("splits") = std::vector<int64_t>{}, py::arg("process_set_id") = 0,
      py::arg("device") = -1, py::arg("stream") = 0);

  m.def(
      "reducescatter_async",
      [](const std::string& name, std::uintptr_t input, const std::string& dtype,
         const std::vector<int64_t>& shape, ReduceOp op, double prescale, double postscale,
         int process_set_id, int device, std::uintptr_t stream) {
        PendingOperation pending;
        pending.output = std::make_shared<Tensor>();
        pending.handle = reducescatter_async(name, make_view(input, dtype, shape, device, stream),
                                             pending.output.get(), op, prescale, postscale,
                                             find_process_set(process_set_id));
        return pending;
      },
      py::arg("name"), py::arg("input"), py::arg("dtype"), py::arg("shape"), py::arg("op"),
      py::arg("prescale") = 1.0, py::arg("postscale") = 1.0, py::arg("process_set_id") = 0,
      py::arg("device") = -1, py::arg("stream") = 0);
}

}  // namespace herd::python
