#pragma once
// JSON and text file I/O with errors that name the file; writes are atomic so no partial output survives.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace fact {

std::string read_text_file(const std::filesystem::path& path, const std::string& what);
// `what` names the file's role in messages, e.g. "IR file" or "rule file".
nlohmann::json read_json_file(const std::filesystem::path& path, const std::string& what);
// Writes to a temporary sibling, then renames over `path`.
void write_file_atomic(const std::filesystem::path& path, const std::string& content);

}  // namespace fact
