// herd::Error: the one exception type the public API throws.
//
// Thrown by every public function on misuse (a call before init or after
// shutdown, a name already pending) and by herd::wait when the operation behind
// a handle failed (a shape mismatch across ranks, a transport failure, a shut
// down). what() carries the whole message: tensor name, ranks and values.
#pragma once

#include <stdexcept>
#include <string>

namespace herd {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace herd
