// herd._native: the compiled half of the herd Python package.
#include <pybind11/pybind11.h>

#include "native/bindings.h"

namespace {

// herd::Error arrives as herd.Error, a RuntimeError as Horovod's
// HorovodInternalError is, or as one of its two subclasses by the error's
// kind: InvalidArgumentError is also a ValueError (a call wrong on this rank,
// which Horovod raises as ValueError), UnsupportedError also a
// NotImplementedError. Code that catches herd.Error still catches all three.
void bind_errors(pybind11::module_& m) {
  static pybind11::exception<herd::Error> error(m, "Error", PyExc_RuntimeError);
  pybind11::object bases = pybind11::make_tuple(error, pybind11::handle(PyExc_ValueError));
  static pybind11::handle invalid_argument = PyErr_NewExceptionWithDoc(
      "herd._native.InvalidArgumentError",
      "A call that is wrong on this rank by itself; nothing was submitted.", bases.ptr(), nullptr);
  bases = pybind11::make_tuple(error, pybind11::handle(PyExc_NotImplementedError));
  static pybind11::handle unsupported = PyErr_NewExceptionWithDoc(
      "herd._native.UnsupportedError", "A well-formed request that herd does not support.",
      bases.ptr(), nullptr);
  if (!invalid_argument || !unsupported) throw pybind11::error_already_set();
  m.attr("InvalidArgumentError") = invalid_argument;
  m.attr("UnsupportedError") = unsupported;
  pybind11::register_exception_translator([](std::exception_ptr thrown) {
    try {
      if (thrown) std::rethrow_exception(thrown);
    } catch (const herd::Error& e) {
      switch (e.kind()) {
        case herd::ErrorKind::kInvalidArgument:
          PyErr_SetString(invalid_argument.ptr(), e.what());
          return;
        case herd::ErrorKind::kNotImplemented: PyErr_SetString(unsupported.ptr(), e.what()); return;
        case herd::ErrorKind::kFailed: break;
      }
      PyErr_SetString(error.ptr(), e.what());
    }
  });
}

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "herd's C++ runtime; use it through the herd package";
  bind_errors(m);
  herd::python::bind_dtypes(m);
  herd::python::bind_basics(m);
  herd::python::bind_collectives(m);
  herd::python::bind_host_buffers(m);
  herd::python::bind_shared_buffer(m);
  herd::python::bind_kvstore(m);
  herd::python::bind_recordio(m);
}
