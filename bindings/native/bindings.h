// The parts of herd._native, each bound by its own function; module.cc calls
// them in order. Python callers reach these through the herd package
// (bindings/python/herd), never directly.
//
// Convention of the whole extension: tensors cross as (address, dtype name,
// shape, device, stream). The Python layer takes the address from a NumPy
// array or a torch tensor and keeps that object alive until the operation
// completes, so no data is copied here. `device` is -1 for host memory (the
// default, and all herd.numpy uses) or a GPU's ordinal; `stream` is the
// address of the cudaStream_t the data is produced on (0: the legacy default
// stream), which herd waits on (herd/types.h, TensorView); the bindings never
// call CUDA themselves, so they build the same with or without it.
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

// The element's code in the array interface protocols ("<f4"; "<V2" for
// bfloat16, which NumPy lacks).
std::string array_typestr(DataType dtype);

// The device a view or Tensor is on: -1 for the CPU, else the GPU's ordinal
// (throws pybind11::value_error for another negative number).
Device parse_device(int index);
// The inverse: -1 for the CPU, the ordinal for a GPU.
int device_index(const Device& device);

// A view of caller-owned memory: host memory for device -1, that GPU's
// memory otherwise, produced on `stream` (ignored for the CPU).
TensorView make_view(std::uintptr_t address, const std::string& dtype,
                     const std::vector<int64_t>& shape, int device = -1, std::uintptr_t stream = 0);

void bind_dtypes(pybind11::module_& m);
void bind_basics(pybind11::module_& m);
void bind_shared_buffer(pybind11::module_& m);
void bind_collectives(pybind11::module_& m);
void bind_host_buffers(pybind11::module_& m);
void bind_kvstore(pybind11::module_& m);
void bind_recordio(pybind11::module_& m);

}  // namespace herd::python
