#include "tools/herd_rec/file_io.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/error.h"

namespace herd::rec_tool {
namespace {

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw herd::Error(path + ": " + what + ": " + std::strerror(errno));
}

// Closes the descriptor on every way out of a function.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  int get() const { return fd_; }
  // Closes now, so that a failing close (a full disk on NFS) is reported.
  int release_close() {
    const int result = ::close(fd_);
    fd_ = -1;
    return result;
  }

 private:
  int fd_;
};

}  // namespace

std::vector<uint8_t> read_whole_file(const std::string& path) {
  Descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail(path, "cannot be opened");
  struct stat info;
  if (::fstat(fd.get(), &info) != 0) fail(path, "cannot be examined");
  if (S_ISDIR(info.st_mode)) throw herd::Error(path + ": is a directory, not a file");
  std::vector<uint8_t> bytes;
  bytes.reserve(static_cast<std::size_t>(info.st_size));
  uint8_t buffer[1 << 16];
  for (;;) {
    const ssize_t got = ::read(fd.get(), buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail(path, "cannot be read");
    if (got == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + got);
  }
  return bytes;
}

void write_whole_file(const std::string& path, const void* data, std::size_t size) {
  Descriptor fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail(path, "cannot be created");
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t put = ::write(fd.get(), bytes + done, size - done);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) fail(path, "cannot be written");
    done += static_cast<std::size_t>(put);
  }
  if (fd.release_close() != 0) fail(path, "cannot be written");
}

void write_whole_file(const std::string& path, const std::string& text) {
  write_whole_file(path, text.data(), text.size());
}

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string join_path(const std::string& directory, const std::string& path) {
  if (!path.empty() && path[0] == '/') return path;
  if (directory.empty()) return path;
  return directory.back() == '/' ? directory + path : directory + "/" + path;
}

}  // namespace herd::rec_tool
