#include "common/enforce.h"

namespace herd::detail {

void throw_internal_error(const char* file, int line, const std::string& what) {
  throw InternalError(fmt::format("herd internal error at {}:{}: {}", file, line, what));
}

}  // namespace herd::detail
