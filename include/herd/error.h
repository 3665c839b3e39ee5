// herd::Error: the one exception type the public API throws.
//
// Thrown by every public function on misuse (a call before init or after
// shutdown, a name already pending) and by herd::wait when the operation behind
// a handle failed (a shape mismatch across ranks, a transport failure, a shut
// down). what() carries the whole message: tensor name, ranks and values.
// kind() says which of three failures it is, so that front ends can raise the
// exception type their users expect (herd.torch: ValueError, NotImplementedError,
// or herd.Error, which is Horovod's HorovodInternalError).
#pragma once

#include <stdexcept>
#include <string>

namespace herd {

enum class ErrorKind {
  // The operation or the job failed: a disagreement across ranks found at
  // negotiation, a peer's failure, a timeout, a shutdown.
  kFailed,
  // This rank's call was wrong by itself and nothing was submitted: a bad
  // argument, a name still pending, a call before init.
  kInvalidArgument,
  // A well-formed request herd does not support (Adasum for reducescatter,
  // Adasum on a process set whose size is not a power of two).
  kNotImplemented,
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ErrorKind kind = ErrorKind::kFailed)
      : std::runtime_error(message), kind_(kind) {}

  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace herd
