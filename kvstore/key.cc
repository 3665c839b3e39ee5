#include "herd/kvstore.h"

namespace herd {
namespace kv {

std::string Key::to_string() const {
  if (is_int_) return std::to_string(int_);
  return "\"" + str_ + "\"";
}

}  // namespace kv
}  // namespace herd
