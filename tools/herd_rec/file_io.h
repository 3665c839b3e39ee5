// Whole small files (the images an .lst names, the payloads unpack writes)
// read and written with errors that name the file and the system's reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace herd::rec_tool {

// Throws herd::Error naming `path` when it cannot be opened or read.
std::vector<uint8_t> read_whole_file(const std::string& path);
// Creates or truncates `path`; throws herd::Error naming it when a step fails.
void write_whole_file(const std::string& path, const void* data, std::size_t size);
void write_whole_file(const std::string& path, const std::string& text);

// The directory part of `path` ("." when it has none).
std::string directory_of(const std::string& path);
// `path` when absolute, else `directory`/`path`.
std::string join_path(const std::string& directory, const std::string& path);

}  // namespace herd::rec_tool
