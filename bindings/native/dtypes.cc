// Names of element types, reduction operators and devices as Python sees them.
#include <pybind11/stl.h>

#include <array>
#include <utility>

#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {
namespace {

// One row per element type herd reduces; the names are herd::to_string's,
// which are also NumPy's and (without the "torch." prefix) torch's. typestr is
// the element's code in the array interface protocols (NumPy's
// __array_interface__, __cuda_array_interface__): little-endian, as every
// machine with CUDA is; bfloat16, which NumPy lacks, is an opaque 2-byte "V2".
struct DataTypeRow {
  const char* name;
  DataType dtype;
  const char* typestr;
};
const std::array<DataTypeRow, 9> kDataTypes = {{
    {"uint8", DataType::kUInt8, "|u1"},
    {"int8", DataType::kInt8, "|i1"},
    {"int16", DataType::kInt16, "<i2"},
    {"int32", DataType::kInt32, "<i4"},
    {"int64", DataType::kInt64, "<i8"},
    {"float16", DataType::kFloat16, "<f2"},
    {"bfloat16", DataType::kBFloat16, "<V2"},
    {"float32", DataType::kFloat32, "<f4"},
    {"float64", DataType::kFloat64, "<f8"},
}};

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (const auto& row : kDataTypes) names.emplace_back(row.name);
  return names;
}

}  // namespace

DataType parse_dtype(const std::string& name) {
  for (const auto& row : kDataTypes) {
    if (name == row.name) return row.dtype;
  }
  std::string accepted;
  for (const auto& row : kDataTypes)
    accepted += std::string(accepted.empty() ? "" : ", ") + row.name;
  throw py::value_error("herd does not reduce elements of type '" + name + "'; it takes " +
                        accepted);
}

Device parse_device(int index) {
  if (index == -1) return Device::cpu();
  if (index < 0) {
    throw py::value_error("herd: device " + std::to_string(index) +
                          " is neither -1 (the CPU) nor a GPU's ordinal (0 or more)");
  }
  return Device::gpu(index);
}

std::string array_typestr(DataType dtype) {
  for (const auto& row : kDataTypes) {
    if (row.dtype == dtype) return row.typestr;
  }
  throw py::value_error("herd: no array-interface code for element type " + to_string(dtype));
}

int device_index(const Device& device) {
  return device.type == DeviceType::kCPU ? -1 : device.index;
}

TensorView make_view(std::uintptr_t address, const std::string& dtype,
                     const std::vector<int64_t>& shape, int device, std::uintptr_t stream) {
  TensorView view;
  view.data = reinterpret_cast<void*>(address);
  view.dtype = parse_dtype(dtype);
  view.shape = shape;
  // Whether this build can use a GPU, and whether that GPU exists, is the
  // runtime's to say (a herd.Error), not the bindings'.
  view.device = parse_device(device);
  view.stream = reinterpret_cast<void*>(stream);
  return view;
}

void bind_dtypes(py::module_& m) {
  py::enum_<ReduceOp>(m, "ReduceOp")
      .value("SUM", ReduceOp::kSum)
      .value("AVERAGE", ReduceOp::kAverage)
      .value("MIN", ReduceOp::kMin)
      .value("MAX", ReduceOp::kMax)
      .value("PRODUCT", ReduceOp::kProduct)
      .value("ADASUM", ReduceOp::kAdasum);
  m.def("dtype_names", &dtype_names, "The element types herd's collectives take, by name.");
  m.def(
      "element_size", [](const std::string& dtype) { return element_size(parse_dtype(dtype)); },
      py::arg("dtype"), "Bytes per element of the named type.");
}

}  // namespace herd::python
