// herd::data's RecordIO framing for herd.recordio (bindings/python/herd/
// recordio.py), in the submodule herd._native.recordio. The .idx file and
// the image-record header are handled in Python, as MXNet does: any key type
// goes in an .idx written from Python.
//
// Every read and write runs without the GIL, so Python threads reading
// records overlap their I/O; a mutex per object keeps two threads from using
// one reader or writer at once (herd::data's are not thread-safe). The mutex
// is only taken with the GIL released, so a thread waiting for it never holds
// the GIL the other one needs to finish.
#include <pybind11/pybind11.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "herd/recordio.h"
#include "native/bindings.h"

namespace py = pybind11;

namespace herd::python {
namespace {

py::bytes to_bytes(const std::vector<uint8_t>& record) {
  return py::bytes(reinterpret_cast<const char*>(record.data()), record.size());
}

// Writes records to a new file (MXRecordIO in mode 'w').
class Writer {
 public:
  explicit Writer(const std::string& path) : path_(path), writer_(new data::RecordWriter(path)) {}

  // Any bytes-like object; returns the offset of the record's head.
  uint64_t write(const py::buffer& record) {
    py::buffer_info info = record.request();
    if (!PyBuffer_IsContiguous(info.view(), 'C')) {
      throw py::value_error("herd.recordio: " + path_ +
                            ": a record is a contiguous bytes-like object");
    }
    const std::size_t size = static_cast<std::size_t>(info.size * info.itemsize);
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return open_writer().write(info.ptr, size);
  }

  uint64_t tell() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return open_writer().tell();
  }

  void flush() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    open_writer().flush();
  }

  // Flushes and closes; a second close does nothing.
  void close() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!writer_) return;
    // Released first, so that a failed close (disk full) leaves the object
    // closed rather than retrying in the destructor.
    std::unique_ptr<data::RecordWriter> writer = std::move(writer_);
    writer->close();
  }

  // Leaves the file to the process that opened it, writing nothing: in a
  // process forked from that one, the buffer holds the opener's records not
  // yet written, which closing here would append a second time (the two
  // processes share the file's offset). The RecordWriter is leaked on purpose.
  void abandon() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    (void)writer_.release();
  }

  uint64_t escaped_magic_count() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return open_writer().escaped_magic_count();
  }

  bool closed() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return writer_ == nullptr;
  }

  const std::string& path() const { return path_; }

 private:
  data::RecordWriter& open_writer() {
    if (!writer_) throw py::value_error("herd.recordio: " + path_ + " is closed");
    return *writer_;
  }

  std::string path_;
  std::mutex mutex_;
  std::unique_ptr<data::RecordWriter> writer_;
};

// Reads records (MXRecordIO in mode 'r'): one after another through
// RecordReader's large buffer from the start, and by pread from the first
// seek() on, so that random access by key reads only the record asked for.
class Reader {
 public:
  explicit Reader(const std::string& path)
      : path_(path), sequential_(new data::RecordReader(path)) {
    size_ = sequential_->size();
  }

  // The next record, or None after the last one.
  py::object read() {
    std::optional<std::vector<uint8_t>> record;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      record = read_next();
    }
    if (!record) return py::none();
    return to_bytes(*record);
  }

  uint64_t tell() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    check_open();
    return random_ ? position_ : sequential_->tell();
  }

  // Continues at `offset`, which the next read() checks is a record's head.
  void seek(uint64_t offset) {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    move_to(offset);
  }

  // seek(offset) and read() in one step, so that threads sharing the reader
  // each get the record they asked for.
  py::object read_at(uint64_t offset) {
    std::optional<std::vector<uint8_t>> record;
    {
      py::gil_scoped_release release;
      std::lock_guard<std::mutex> lock(mutex_);
      move_to(offset);
      record = read_next();
    }
    if (!record) return py::none();
    return to_bytes(*record);
  }

  void close() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    sequential_.reset();
    random_.reset();
    closed_ = true;
  }

  bool closed() {
    py::gil_scoped_release release;
    std::lock_guard<std::mutex> lock(mutex_);
    return closed_;
  }

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }

 private:
  void check_open() const {
    if (closed_) throw py::value_error("herd.recordio: " + path_ + " is closed");
  }

  void move_to(uint64_t offset) {
    check_open();
    if (!random_) random_ = std::make_unique<data::RecordFile>(path_);
    position_ = offset;
  }

  std::optional<std::vector<uint8_t>> read_next() {
    check_open();
    std::vector<uint8_t> record;
    if (!random_) {
      if (!sequential_->next(&record)) return std::nullopt;
      return record;
    }
    // At the end exactly: no more records. Past it, read_at names the offset.
    if (position_ == random_->size()) return std::nullopt;
    position_ = random_->read_at(position_, &record);
    return record;
  }

  std::string path_;
  uint64_t size_ = 0;
  std::mutex mutex_;
  bool closed_ = false;
  std::unique_ptr<data::RecordReader> sequential_;
  // From the first seek() on; position_ is then the next record's head.
  std::unique_ptr<data::RecordFile> random_;
  uint64_t position_ = 0;
};

}  // namespace

void bind_recordio(py::module_& m) {
  py::module_ recordio =
      m.def_submodule("recordio", "herd::data's RecordIO framing, for herd.recordio");
  recordio.attr("RECORD_MAGIC") = data::kRecordMagic;
  recordio.attr("MAX_RECORD_LENGTH") = data::kMaxRecordLength;

  py::class_<Writer>(recordio, "Writer",
                     "Writes records to a new .rec file (truncating one that exists).")
      .def(py::init<const std::string&>(), py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def("write", &Writer::write, py::arg("record"),
           "Appends one record; returns the byte offset of its head.")
      .def("tell", &Writer::tell, "The offset the next record's head will have.")
      .def("flush", &Writer::flush)
      .def("close", &Writer::close, "Flushes and closes; raises herd.Error if a write failed.")
      .def("abandon", &Writer::abandon,
           "Closes without writing the buffer: for a writer inherited across fork.")
      .def_property_readonly("escaped_magic_count", &Writer::escaped_magic_count,
                             "Aligned magic words escaped so far (dmlc's except_counter).")
      .def_property_readonly("closed", &Writer::closed)
      .def_property_readonly("path", &Writer::path);

  py::class_<Reader>(recordio, "Reader", "Reads the records of a .rec file.")
      .def(py::init<const std::string&>(), py::arg("path"),
           py::call_guard<py::gil_scoped_release>())
      .def("read", &Reader::read, "The next record as bytes, or None after the last one.")
      .def("tell", &Reader::tell, "The offset of the next record's head.")
      .def("seek", &Reader::seek, py::arg("offset"),
           "Continues at this offset, which must be a record's head.")
      .def("read_at", &Reader::read_at, py::arg("offset"),
           "seek(offset), then read(), in one step.")
      .def("close", &Reader::close)
      .def_property_readonly("closed", &Reader::closed)
      .def_property_readonly("path", &Reader::path)
      .def_property_readonly("size", &Reader::size, "The file's size in bytes.");
}

}  // namespace herd::python
