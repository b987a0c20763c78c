#include "core/files.h"

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fact {
namespace fs = std::filesystem;

std::string read_text_file(const fs::path& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(what + " '" + path.string() + "' cannot be read (missing or not readable)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json read_json_file(const fs::path& path, const std::string& what) {
  std::string text = read_text_file(path, what);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw Error(what + " '" + path.string() + "' is not valid JSON: " + e.what());
  }
}

void write_file_atomic(const fs::path& path, const std::string& content) {
  if (path.has_parent_path()) fs::create_directories(path.parent_path());
  fs::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + tmp.string() + "'");
    out << content;
    if (!out.flush()) throw Error("cannot write '" + tmp.string() + "' (disk full?)");
  }
  fs::rename(tmp, path);
}

}  // namespace fact
