#include "src/rank_file_path.h"

namespace herd::detail {

std::string rank_file_path(const std::string& path, int rank) {
  if (path.find("%r") == std::string::npos) return rank == 0 ? path : std::string();
  std::string result = path;
  const std::string digits = std::to_string(rank);
  for (std::size_t at = result.find("%r"); at != std::string::npos;
       at = result.find("%r", at + digits.size())) {
    result.replace(at, 2, digits);
  }
  return result;
}

}  // namespace herd::detail
