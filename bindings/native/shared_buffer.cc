#include <pybind11/pybind11.h>

#include <cstddef>
#include <memory>

#include "native/bindings.h"

namespace herd::python {

namespace py = pybind11;

void bind_shared_buffer(py::module_& m) {
  // Host memory always, so pybind11's own buffer entry serves: its callback
  // never has a request to refuse.
  py::class_<SharedBuffer, std::shared_ptr<SharedBuffer>>(
      m, "SharedBuffer", py::buffer_protocol(),
      "herd::SharedBuffer: zeroed host memory the other ranks on this machine can map, so that "
      "allreduces of tensors in it read straight from each other's memory. Writable bytes "
      "through the buffer protocol; freed when the last reference goes.")
      .def(py::init([](std::size_t nbytes) {
             if (nbytes == 0) throw py::value_error("herd.SharedBuffer: 0 bytes");
             return std::make_shared<SharedBuffer>(nbytes);
           }),
           py::arg("nbytes"))
      .def_property_readonly("nbytes", &SharedBuffer::size)
      .def_buffer([](SharedBuffer& buffer) {
        return py::buffer_info(buffer.data(), 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(buffer.size())}, {py::ssize_t{1}});
      });
}

}  // namespace herd::python
