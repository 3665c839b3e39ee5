#include "launcher/herdrun/output_relay.h"

#include <cerrno>

#include <unistd.h>

namespace herd::launcher {

void write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t written = ::write(fd, bytes.data(), bytes.size());
    if (written < 0) {
      if (errno == EINTR) continue;
      return;
    }
    bytes.remove_prefix(static_cast<size_t>(written));
  }
}

void OutputRelay::consume(std::string_view bytes) {
  write_all(fd_, bytes);
  for (auto newline = bytes.find('\n'); newline != std::string_view::npos;
       newline = bytes.find('\n')) {
    partial_.append(bytes.substr(0, newline));
    report_->mpirun_line(partial_);
    partial_.clear();
    bytes.remove_prefix(newline + 1);
  }
  partial_.append(bytes);
}

void OutputRelay::finish() {
  if (!partial_.empty()) report_->mpirun_line(partial_);
  partial_.clear();
}

}  // namespace herd::launcher
