#include "discover/example_catalog.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "discover/code_tokenizer.h"

namespace fact::discover {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string text_field(const json& j, const std::string& key, const std::string& origin, bool required) {
  if (!j.contains(key)) {
    if (required) throw Error(origin + ": missing \"" + key + "\" (a string); add it");
    return "";
  }
  if (!j[key].is_string()) throw Error(origin + ": \"" + key + "\" must be a string");
  return j[key].get<std::string>();
}

std::vector<std::string> list_field(const json& j, const std::string& key, const std::string& origin) {
  std::vector<std::string> out;
  if (!j.contains(key)) return out;
  if (!j[key].is_array()) throw Error(origin + ": \"" + key + "\" must be a list of strings");
  for (const auto& v : j[key]) {
    if (!v.is_string()) throw Error(origin + ": \"" + key + "\" must be a list of strings, found " + v.dump());
    out.push_back(v.get<std::string>());
  }
  return out;
}

std::vector<std::string> arch_list(const json& j, const std::string& origin) {
  auto archs = list_field(j, "arch", origin);
  for (auto& a : archs) {
    try {
      a = normalize_arch(a);
    } catch (const Error& e) {
      throw Error(origin + ": " + e.what());
    }
  }
  return archs;
}

// Fields shared by both catalogs: title, arch, family, dtypes, epilogue, tags.
void read_common_fields(const json& j, const std::string& origin, ExampleEntry& e) {
  if (!j.is_object()) throw Error(origin + ": must be an object with title, arch, family, dtypes");
  e.title = text_field(j, "title", origin, true);
  e.family = text_field(j, "family", origin, true);
  e.epilogue = text_field(j, "epilogue", origin, false);
  e.arch = arch_list(j, origin);
  e.dtypes = list_field(j, "dtypes", origin);
  e.tags = list_field(j, "tags", origin);
}

bool is_text_file_name(const std::string& name) {
  std::string lower = name;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.rfind("readme", 0) == 0) return true;
  for (const char* ext : {".cu", ".cpp", ".h", ".hpp", ".cuh"}) {
    std::string e = ext;
    if (lower.size() >= e.size() && lower.compare(lower.size() - e.size(), e.size(), e) == 0) return true;
    if (lower.find(e + ".") != std::string::npos) return true;  // templates: gemm.cu.in, gemm.cu.j2
  }
  return false;
}

bool is_numbered_folder(const std::string& name) {
  size_t i = 0;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  return i > 0 && i < name.size() && name[i] == '_';
}

}  // namespace

int arch_number(const std::string& arch) {
  std::string s;
  for (char c : arch) {
    if (c != '_') s += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (s.rfind("sm", 0) == 0) s = s.substr(2);
  if (!s.empty() && (s.back() == 'a' || s.back() == 'f')) s.pop_back();
  if (s.empty() || s.size() > 4 || !std::all_of(s.begin(), s.end(), [](char c) { return std::isdigit(c); }))
    return -1;
  return std::stoi(s);
}

std::string normalize_arch(const std::string& arch) {
  int n = arch_number(arch);
  if (n < 0) throw Error("'" + arch + "' is not an architecture; write it as smNN, e.g. sm80, sm90, sm100");
  return "sm" + std::to_string(n);
}

bool arch_matches(const std::vector<std::string>& entry_arch, const std::string& target, ArchMatch match) {
  int t = arch_number(target);
  for (const auto& a : entry_arch) {
    int n = arch_number(a);
    if (n == t) return true;
    if (match == ArchMatch::compatible && n >= 0 && n < 90 && n <= t) return true;
  }
  return false;
}

std::vector<std::string> ExampleNaming::guess_arch(const std::string& folder) const {
  auto words = tokenize_code(folder);
  for (const auto& [word, archs] : arch_by_word)
    if (std::find(words.begin(), words.end(), word) != words.end()) return archs;
  return default_arch;
}

std::string ExampleNaming::guess_family(const std::string& folder) const {
  auto words = tokenize_code(folder);
  for (const auto& [word, family] : family_by_word)
    if (std::find(words.begin(), words.end(), word) != words.end()) return family;
  return default_family;
}

std::vector<std::string> ExampleNaming::generation_words(const std::string& arch) const {
  std::vector<std::string> out;
  for (const auto& [word, archs] : arch_by_word)
    if (archs.size() == 1 && archs[0] == arch && word != arch) out.push_back(word);
  return out;
}

CutlassMetadata load_cutlass_metadata(const fs::path& metadata_file) {
  json doc = read_json_file(metadata_file, "CUTLASS example metadata");
  std::string origin = metadata_file.string();
  CutlassMetadata meta;
  if (doc.contains("guess")) {
    const json& g = doc["guess"];
    for (const auto& pair : g.value("arch_by_word", json::array())) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_array())
        throw Error(origin + ": guess.arch_by_word entries must be [\"word\", [\"smNN\", ...]], found " + pair.dump());
      std::vector<std::string> archs;
      for (const auto& a : pair[1]) archs.push_back(normalize_arch(a.get<std::string>()));
      meta.naming.arch_by_word.emplace_back(pair[0].get<std::string>(), archs);
    }
    for (const auto& a : list_field(g, "default_arch", origin + " guess")) meta.naming.default_arch.push_back(normalize_arch(a));
    for (const auto& pair : g.value("family_by_word", json::array())) {
      if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string() || !pair[1].is_string())
        throw Error(origin + ": guess.family_by_word entries must be [\"word\", \"family\"], found " + pair.dump());
      meta.naming.family_by_word.emplace_back(pair[0].get<std::string>(), pair[1].get<std::string>());
    }
    if (g.contains("default_family")) meta.naming.default_family = text_field(g, "default_family", origin, true);
  }
  if (!doc.contains("examples") || !doc["examples"].is_object())
    throw Error(origin + ": missing \"examples\" (an object keyed by example folder name)");
  for (const auto& [folder, fields] : doc["examples"].items()) {
    ExampleEntry e;
    e.ref = "cutlass:" + folder;
    read_common_fields(fields, origin + " examples." + folder, e);
    e.curated = true;
    meta.curated.push_back(std::move(e));
  }
  return meta;
}

std::vector<fs::path> example_text_files(const fs::path& path) {
  std::vector<fs::path> files;
  if (fs::is_regular_file(path)) return {path};
  if (!fs::is_directory(path)) return files;
  for (const auto& item : fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied))
    if (item.is_regular_file() && is_text_file_name(item.path().filename().string())) files.push_back(item.path());
  std::sort(files.begin(), files.end());
  return files;
}

std::vector<ExampleEntry> load_cutlass_examples(const fs::path& examples_dir, const CutlassMetadata& metadata) {
  if (!fs::is_directory(examples_dir))
    throw Error("CUTLASS examples folder '" + examples_dir.string() +
                "' does not exist; set CUTLASS_DIR to a CUTLASS source root or reinstall the nvidia-cutlass wheel");
  std::vector<std::string> folders;
  for (const auto& item : fs::directory_iterator(examples_dir))
    if (item.is_directory() && is_numbered_folder(item.path().filename().string()))
      folders.push_back(item.path().filename().string());
  std::sort(folders.begin(), folders.end());

  std::vector<ExampleEntry> entries;
  std::set<std::string> seen;
  for (const auto& folder : folders) {
    ExampleEntry e;
    auto curated = std::find_if(metadata.curated.begin(), metadata.curated.end(),
                                [&](const ExampleEntry& c) { return c.ref == "cutlass:" + folder; });
    if (curated != metadata.curated.end()) {
      e = *curated;
    } else {
      e.ref = "cutlass:" + folder;
      e.title = folder.substr(folder.find('_') + 1);
      std::replace(e.title.begin(), e.title.end(), '_', ' ');
      e.arch = metadata.naming.guess_arch(folder);
      e.family = metadata.naming.guess_family(folder);
      spdlog::debug("example index: {} has no curated metadata; guessed arch {} and family {}", e.ref,
                    e.arch.empty() ? "(none)" : e.arch.front(), e.family);
    }
    e.path = examples_dir / folder;
    e.files = example_text_files(e.path);
    seen.insert(e.ref);
    entries.push_back(std::move(e));
  }
  for (const auto& c : metadata.curated)
    if (!seen.count(c.ref))
      spdlog::warn("example index: {} is in the metadata but not in {}; skipped (older CUTLASS wheel?)", c.ref,
                   examples_dir.string());
  return entries;
}

std::vector<ExampleEntry> load_fact_kernels(const fs::path& catalog_file, const fs::path& fact_home) {
  json doc = read_json_file(catalog_file, "FACT kernel catalog");
  std::string origin = catalog_file.string();
  if (!doc.contains("kernels") || !doc["kernels"].is_array())
    throw Error(origin + ": missing \"kernels\" (a list of {ref, path, arch, family, dtypes, title})");
  std::vector<ExampleEntry> entries;
  std::set<std::string> refs;
  for (size_t i = 0; i < doc["kernels"].size(); ++i) {
    const json& k = doc["kernels"][i];
    std::string where = origin + " kernels[" + std::to_string(i) + "]";
    ExampleEntry e;
    e.ref = text_field(k, "ref", where, true);
    if (e.ref.rfind("fact:", 0) != 0 || e.ref.size() <= 5)
      throw Error(where + ": ref '" + e.ref + "' must be written fact:<name>");
    if (!refs.insert(e.ref).second) throw Error(where + ": ref '" + e.ref + "' appears twice; rename one");
    read_common_fields(k, where + " (" + e.ref + ")", e);
    std::string rel = text_field(k, "path", where, true);
    if (fs::path(rel).is_absolute()) throw Error(where + ": path '" + rel + "' must be relative to the repository root");
    e.path = fact_home / rel;
    if (!fs::exists(e.path)) {
      spdlog::warn("example index: {} skipped: its file {} does not exist yet", e.ref, e.path.string());
      continue;
    }
    e.files = example_text_files(e.path);
    e.curated = true;
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace fact::discover
