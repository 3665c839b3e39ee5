// The parts of herd._native, each bound by its own function; module.cc calls
// them in order. Python callers reach these through the herd package
// (bindings/python/herd), never directly.
//
// Convention of the whole extension: tensors cross as (address, dtype name,
// shape) triples. The Python layer takes the address from a NumPy array or a
// torch tensor and keeps that object alive until the operation completes, so
// no data is copied here.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <vector>

#include "herd/herd.h"

namespace herd::python {

// "float32" -> DataType::kFloat32; throws pybind11::value_error naming the
// accepted names otherwise.
DataType parse_dtype(const std::string& name);

// The set with this id among herd::process_sets(); throws pybind11::value_error
// when there is none (removed, or never added).
ProcessSet find_process_set(int id);

// A view of caller-owned host memory.
TensorView make_view(std::uintptr_t address, const std::string& dtype,
                     const std::vector<int64_t>& shape);

void bind_dtypes(pybind11::module_& m);
void bind_basics(pybind11::module_& m);
void bind_collectives(pybind11::module_& m);

}  // namespace herd::python
