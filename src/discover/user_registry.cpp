#include "discover/user_registry.h"

#include <algorithm>
#include <cstdlib>
#include <regex>

#include <unistd.h>

#include "core/error.h"
#include "core/files.h"

namespace fact::discover {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// An entry's name is its folder name and part of C symbols, so keep it a plain identifier.
const std::regex kEntryName("^[a-z][a-z0-9_]{0,63}$");

void require(const json& record, const char* field, json::value_t type, const std::string& where) {
  if (!record.contains(field) || record[field].type() != type)
    throw Error(where + " needs field '" + field + "' of type " + json(type).type_name());
}

void check_record(const json& record, const std::string& where) {
  if (!record.is_object()) throw Error(where + " must hold a JSON object");
  require(record, "arch", json::value_t::string, where);
  require(record, "dtype", json::value_t::string, where);
  require(record, "numerics", json::value_t::string, where);
  require(record, "kernel", json::value_t::object, where);
  require(record, "verification", json::value_t::object, where);
  // Only verified kernels enter the registry: the record must say so.
  if (record["verification"].value("passed", false) != true)
    throw Error(where + " has no passed verification; only verified kernels may be registered");
  if (!record["kernel"].contains("source_file") || !record["kernel"]["source_file"].is_string())
    throw Error(where + " field kernel.source_file must name the kernel source file");
}

RegistryEntry load_entry(const fs::path& dir) {
  RegistryEntry e;
  e.dir = dir;
  e.name = dir.filename().string();
  e.rule = read_json_file(dir / "rule.json", "registry rule file");
  e.record = read_json_file(dir / "record.json", "registry record file");
  check_record(e.record, "registry record '" + (dir / "record.json").string() + "'");
  e.kernel_source = read_text_file(dir / e.record["kernel"]["source_file"].get<std::string>(), "registry kernel source");
  if (e.rule.value("name", "") != e.name)
    throw Error("registry entry '" + dir.string() + "': rule name '" + e.rule.value("name", "") +
                "' differs from its folder name; rename one of them");
  return e;
}

}  // namespace

UserRegistry UserRegistry::open_default() {
  if (const char* v = std::getenv("FACT_REGISTRY"); v && *v) return UserRegistry(v);
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return UserRegistry(fs::path(x) / "fact" / "registry");
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw Error("cannot place the pattern registry: set FACT_REGISTRY (or HOME)");
  return UserRegistry(fs::path(home) / ".local" / "share" / "fact" / "registry");
}

std::vector<RegistryEntry> UserRegistry::list() const {
  std::vector<RegistryEntry> out;
  if (!fs::is_directory(root_)) return out;
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(root_))
    if (d.is_directory() && fs::exists(d.path() / "rule.json")) dirs.push_back(d.path());
  std::sort(dirs.begin(), dirs.end());
  for (const auto& d : dirs) out.push_back(load_entry(d));
  return out;
}

bool UserRegistry::contains(const std::string& name) const { return fs::exists(root_ / name / "rule.json"); }

RegistryEntry UserRegistry::get(const std::string& name) const {
  if (!contains(name)) {
    std::string known;
    for (const auto& e : list()) known += (known.empty() ? "" : ", ") + e.name;
    throw Error("no pattern '" + name + "' in the registry " + root_.string() +
                (known.empty() ? " (it is empty)" : "; it holds: " + known));
  }
  return load_entry(root_ / name);
}

fs::path UserRegistry::add(const json& rule, const json& record, const std::string& kernel_source) {
  std::string name = rule.value("name", "");
  if (!std::regex_match(name, kEntryName))
    throw Error("registry entry name '" + name + "' must match [a-z][a-z0-9_]* (at most 64 characters)");
  parse_rule(rule, "registry rule '" + name + "'");
  check_record(record, "registry record of '" + name + "'");
  fs::create_directories(root_);
  fs::path tmp = root_ / (".tmp-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(tmp);
  write_file_atomic(tmp / "rule.json", rule.dump(1) + "\n");
  write_file_atomic(tmp / "record.json", record.dump(1) + "\n");
  write_file_atomic(tmp / record["kernel"]["source_file"].get<std::string>(), kernel_source);
  fs::path dest = root_ / name;
  fs::remove_all(dest);
  fs::rename(tmp, dest);
  return dest;
}

std::vector<fs::path> UserRegistry::export_to(const fs::path& dest, const std::string& name) const {
  std::vector<fs::path> out;
  std::vector<RegistryEntry> entries = name.empty() ? list() : std::vector<RegistryEntry>{get(name)};
  for (const auto& e : entries) {
    fs::path to = dest / e.name;
    fs::create_directories(to);
    fs::copy(e.dir, to, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    out.push_back(to);
  }
  return out;
}

std::vector<Rule> UserRegistry::rules() const {
  std::vector<Rule> out;
  for (const auto& e : list()) {
    Rule r = parse_rule(e.rule, "registry rule '" + (e.dir / "rule.json").string() + "'");
    r.file = e.dir / "rule.json";
    out.push_back(std::move(r));
  }
  return out;
}

PatternRegistry builtin_and_user_rules() {
  PatternRegistry reg = PatternRegistry::builtin();
  for (auto& r : UserRegistry::open_default().rules()) reg.add(std::move(r));
  return reg;
}

}  // namespace fact::discover
