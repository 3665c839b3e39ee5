// Per-rank file paths of the settings that name a file (HERD_TIMELINE,
// HERD_AUTOTUNE_LOG): "%r" stands for the rank, so every rank writes its own
// file; a path without it is rank 0's alone.
#pragma once

#include <string>

namespace herd::detail {

// `path` with every "%r" replaced by `rank`; without "%r", `path` on rank 0
// and an empty string (no file) on the other ranks.
std::string rank_file_path(const std::string& path, int rank);

}  // namespace herd::detail
