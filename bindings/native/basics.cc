// Lifetime, topology and process sets: the calls that are not collectives on
// tensors. Every call that can wait on other ranks releases the GIL, so the
// caller's other Python threads run meanwhile.
#include <pybind11/stl.h>

#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {

ProcessSet find_process_set(int id) {
  for (const ProcessSet& set : process_sets()) {
    if (set.id() == id) return set;
  }
  throw py::value_error("herd: there is no process set " + std::to_string(id) +
                        " (removed, or never added)");
}

void bind_basics(py::module_& m) {
  using release = py::call_guard<py::gil_scoped_release>;
  m.def("init", &init, release(),
        "Initializes MPI if needed, reads the HERD_* settings and starts the background thread.");
  m.def("shutdown", &shutdown, release(), "Stops herd; pending operations fail.");
  m.def("fail", &fail, release(), py::arg("reason"),
        "Ends the job on every rank with `reason`, then stops herd on this rank.");
  m.def("shutdown_at_exit", &shutdown_at_exit, release(),
        "Stops herd as a process that exits without shutdown: the other ranks learn it.");
  m.def("is_initialized", &is_initialized);
  m.def("rank", &rank);
  m.def("size", &size);
  m.def("local_rank", &local_rank);
  m.def("local_size", &local_size);
  m.def("cross_rank", &cross_rank);
  m.def("cross_size", &cross_size);
  m.def("mpi_threads_supported", &mpi_threads_supported);
  m.def("is_homogeneous", &is_homogeneous);
  // Both callable before init.
  m.def("cuda_built", &cuda_built, "Whether this build of herd has the GPU path (CUDA).");
  m.def("nccl_built", &nccl_built, "Whether this build of herd uses NCCL for GPU tensors.");
  m.def("nccl_version_code", &nccl_version_code,
        "NCCL_VERSION_CODE of the NCCL herd was built with; 0 without NCCL.");

  m.def(
      "add_process_set",
      [](std::vector<int> ranks) { return add_process_set(std::move(ranks)).id(); }, release(),
      py::arg("ranks"),
      "Makes a process set of these global ranks; collective over the whole job. Returns its id.");
  m.def(
      "remove_process_set", [](int id) { remove_process_set(find_process_set(id)); }, release(),
      py::arg("id"), "Removes the set with this id; collective over the whole job.");
  m.def(
      "process_set_ids",
      [] {
        std::vector<int> ids;
        for (const ProcessSet& set : process_sets()) ids.push_back(set.id());
        return ids;
      },
      "The ids of every process set, the global set (0) first.");
  m.def(
      "process_set_ranks",
      [](int id) {
        const ProcessSet set = find_process_set(id);
        if (!set.is_global()) return set.ranks();
        std::vector<int> all(static_cast<std::size_t>(size()));
        for (int r = 0; r < size(); ++r) all[static_cast<std::size_t>(r)] = r;
        return all;
      },
      py::arg("id"), "The global ranks of the set with this id, ascending.");
  m.def(
      "barrier", [](int id) { barrier(find_process_set(id)); }, release(),
      py::arg("process_set_id") = 0);
  m.def("join", &join, release(),
        "Blocks until every rank has joined; returns the rank that joined last.");
  // Release the GIL: stopping waits for the writer thread to finish the file.
  m.def("start_timeline", &start_timeline, release(), py::arg("file_path"),
        py::arg("mark_cycles") = false,
        "Starts writing this rank's timeline (Chrome trace JSON) to file_path.");
  m.def("stop_timeline", &stop_timeline, release(), "Finishes the timeline file.");
  m.def(
      "stats",
      [] {
        py::list result;
        for (const CollectiveStats& s : stats()) {
          py::dict entry;
          entry["collective"] = s.collective;
          entry["process_set"] = s.process_set;
          entry["count"] = s.count;
          entry["failed"] = s.failed;
          entry["bytes"] = s.bytes;
          entry["runs"] = s.runs;
          entry["total_seconds"] = s.total_seconds;
          entry["run_seconds"] = s.run_seconds;
          result.append(std::move(entry));
        }
        return result;
      },
      "This rank's counters per process set and collective (herd::stats()).");
}

}  // namespace herd::python
