// herd._native: the compiled half of the herd Python package.
#include <pybind11/pybind11.h>

#include "native/bindings.h"

PYBIND11_MODULE(_native, m) {
  m.doc() = "herd's C++ runtime; use it through the herd package";
  // herd::Error, the one exception the C++ API throws, arrives as
  // herd.Error, a RuntimeError as Horovod's HorovodInternalError is.
  pybind11::register_exception<herd::Error>(m, "Error", PyExc_RuntimeError);
  herd::python::bind_dtypes(m);
  herd::python::bind_basics(m);
  herd::python::bind_collectives(m);
  herd::python::bind_kvstore(m);
}
