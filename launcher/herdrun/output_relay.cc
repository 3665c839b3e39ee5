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
  while (!bytes.empty()) {
    const auto newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(bytes);
      return;
    }
    if (partial_.empty()) {
      emit(bytes.substr(0, newline), true);
    } else {
      partial_.append(bytes.substr(0, newline));
      emit(partial_, true);
      partial_.clear();
    }
    bytes.remove_prefix(newline + 1);
  }
}

void OutputRelay::finish() {
  if (partial_.empty()) return;
  emit(partial_, false);
  partial_.clear();
}

void OutputRelay::emit(std::string_view line, bool newline) {
  std::string_view shown = line;
  if (auto tagged = parse_tagged_line(line)) {
    report_->rank_line(tagged->rank, tagged->is_stderr, tagged->text);
    shown = tagged->text;
  } else {
    report_->mpirun_line(line);
  }
  std::string out(shown);
  if (newline) out += '\n';
  write_all(fd_, out);
}

}  // namespace herd::launcher
