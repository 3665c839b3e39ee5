// Files the fuzz tests rewrite with one mutant after another, for the
// decoders that read files rather than bytes.
#pragma once

#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

namespace herd::testing {

// Overwrites the file and then cuts it to size, rather than truncating it
// first: ext4 flushes a file truncated to zero and rewritten when it is
// closed, which for thousands of mutants would be most of a test's time.
inline void overwrite_file(const std::string& path, const std::vector<uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  const ssize_t written = bytes.empty() ? 0 : ::pwrite(fd, bytes.data(), bytes.size(), 0);
  const int cut = ::ftruncate(fd, static_cast<off_t>(bytes.size()));
  ::close(fd);
  REQUIRE(written == static_cast<ssize_t>(bytes.size()));
  REQUIRE(cut == 0);
}

// A file under $TMPDIR (or /tmp) named for this process and `name`, removed
// at the end.
class MutantFile {
 public:
  explicit MutantFile(const std::string& name) {
    const char* base = std::getenv("TMPDIR");
    path_ = std::string(base && *base ? base : "/tmp") + "/herd_fuzz_" +
            std::to_string(static_cast<long>(::getpid())) + "_" + name;
  }
  ~MutantFile() { std::remove(path_.c_str()); }
  MutantFile(const MutantFile&) = delete;
  MutantFile& operator=(const MutantFile&) = delete;

  const std::string& path() const { return path_; }
  void write(const std::vector<uint8_t>& bytes) const { overwrite_file(path_, bytes); }
  std::vector<uint8_t> read() const {
    std::ifstream in(path_, std::ios::binary);
    REQUIRE(in.good());
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }

 private:
  std::string path_;
};

}  // namespace herd::testing
