// Names of element types and reduction operators as Python sees them.
#include <pybind11/stl.h>

#include <array>
#include <utility>

#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {
namespace {

// One row per element type herd reduces; the names are herd::to_string's,
// which are also NumPy's and (without the "torch." prefix) torch's.
const std::array<std::pair<const char*, DataType>, 9> kDataTypes = {{
    {"uint8", DataType::kUInt8},
    {"int8", DataType::kInt8},
    {"int16", DataType::kInt16},
    {"int32", DataType::kInt32},
    {"int64", DataType::kInt64},
    {"float16", DataType::kFloat16},
    {"bfloat16", DataType::kBFloat16},
    {"float32", DataType::kFloat32},
    {"float64", DataType::kFloat64},
}};

std::vector<std::string> dtype_names() {
  std::vector<std::string> names;
  for (const auto& row : kDataTypes) names.emplace_back(row.first);
  return names;
}

}  // namespace

DataType parse_dtype(const std::string& name) {
  for (const auto& row : kDataTypes) {
    if (name == row.first) return row.second;
  }
  std::string accepted;
  for (const auto& row : kDataTypes)
    accepted += std::string(accepted.empty() ? "" : ", ") + row.first;
  throw py::value_error("herd does not reduce elements of type '" + name + "'; it takes " +
                        accepted);
}

TensorView make_view(std::uintptr_t address, const std::string& dtype,
                     const std::vector<int64_t>& shape) {
  TensorView view;
  view.data = reinterpret_cast<void*>(address);
  view.dtype = parse_dtype(dtype);
  view.shape = shape;
  return view;
}

void bind_dtypes(py::module_& m) {
  py::enum_<ReduceOp>(m, "ReduceOp")
      .value("SUM", ReduceOp::kSum)
      .value("AVERAGE", ReduceOp::kAverage)
      .value("MIN", ReduceOp::kMin)
      .value("MAX", ReduceOp::kMax)
      .value("PRODUCT", ReduceOp::kProduct);
  m.def("dtype_names", &dtype_names, "The element types herd's collectives take, by name.");
  m.def(
      "element_size", [](const std::string& dtype) { return element_size(parse_dtype(dtype)); },
      py::arg("dtype"), "Bytes per element of the named type.");
}

}  // namespace herd::python
