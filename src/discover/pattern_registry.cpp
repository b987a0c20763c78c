#include "discover/pattern_registry.h"

#include <algorithm>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "discover/pattern_check.h"
#include "discover/shape_expr.h"
#include "ir/dtype.h"

namespace fact::discover {

using Json = nlohmann::json;

namespace {

std::vector<std::string> string_list(const Json& doc, const char* field, const std::string& where, bool required) {
  if (!doc.contains(field)) {
    if (required) throw Error(where + " is missing field '" + field + "'");
    return {};
  }
  const Json& v = doc[field];
  if (!v.is_array()) throw Error(where + " field '" + field + "' must be an array of strings");
  std::vector<std::string> out;
  for (const auto& e : v) {
    if (!e.is_string()) throw Error(where + " field '" + field + "' must hold strings, got " + e.dump());
    out.push_back(e.get<std::string>());
  }
  return out;
}

}  // namespace

Rule parse_rule(const Json& doc, const std::string& origin) { return parse_rule(doc, origin, FragmentLibrary::builtin()); }

Rule parse_rule(const Json& doc, const std::string& origin, const FragmentLibrary& fragments) {
  if (!doc.is_object()) throw Error(origin + " must hold a JSON object");
  Rule r;
  r.name = string_field(doc, "name", origin);
  const std::string where = origin + " (rule '" + r.name + "')";
  r.description = string_field(doc, "description", where);
  r.family = string_field(doc, "family", where);
  r.dtypes = string_list(doc, "dtypes", where, true);
  r.archs = string_list(doc, "archs", where, true);
  if (r.dtypes.empty()) throw Error(where + " field 'dtypes' is empty; list the dtypes the kernel supports");
  if (r.archs.empty()) throw Error(where + " field 'archs' is empty; list sm80, sm90, ...");
  for (const auto& d : r.dtypes)
    if (!ir::is_known_dtype(d)) throw Error(where + " field 'dtypes' has unknown dtype '" + d + "'");
  if (doc.contains("priority")) {
    if (!doc["priority"].is_number_integer()) throw Error(where + " field 'priority' must be an integer");
    r.priority = doc["priority"].get<int>();
  }
  if (!doc.contains("pattern")) throw Error(where + " is missing field 'pattern'");
  r.pattern = fragments.expand(doc["pattern"], where);
  check_pattern(r.pattern, where);
  r.dims = doc.contains("dims") ? doc["dims"] : Json::object();
  if (!r.dims.is_object()) throw Error(where + " field 'dims' must be an object: dim name -> expression");
  for (const auto& [name, expr] : r.dims.items()) {
    if (!expr.is_string()) throw Error(where + " dims['" + name + "'] must be an expression string");
    try {
      ShapeExpr::parse(expr.get<std::string>());
    } catch (const Error& e) {
      throw Error(where + " dims['" + name + "']: " + e.what());
    }
  }
  r.constraints = string_list(doc, "constraints", where, false);
  for (const auto& c : r.constraints) {
    try {
      ShapeExpr::parse(c);
    } catch (const Error& e) {
      throw Error(where + " constraints: " + e.what());
    }
  }
  if (!doc.contains("kernel") || !doc["kernel"].is_object())
    throw Error(where + " needs a 'kernel' object (family, epilogue, ...) telling stage 2 how to realize it");
  r.kernel = doc["kernel"];
  // An example is "cutlass:<folder>" or {"ref": "cutlass:<folder>", "archs": [...]} for arch-specific ones.
  if (doc.contains("examples")) {
    if (!doc["examples"].is_array()) throw Error(where + " field 'examples' must be an array");
    for (const auto& e : doc["examples"]) {
      std::string ref;
      std::vector<std::string> archs;
      if (e.is_string()) {
        ref = e.get<std::string>();
      } else if (e.is_object()) {
        ref = string_field(e, "ref", where + " example");
        archs = string_list(e, "archs", where + " example '" + ref + "'", false);
      } else {
        throw Error(where + " example " + e.dump() + " must be a string or {ref, archs}");
      }
      if (ref.rfind("cutlass:", 0) != 0 || ref.size() == 8)
        throw Error(where + " example '" + ref + "' must read cutlass:<folder under CUTLASS examples/>");
      r.examples.push_back(ref);
      r.example_archs.push_back(archs);
    }
  }
  return r;
}

PatternRegistry PatternRegistry::load(const std::filesystem::path& dir) {
  if (!std::filesystem::is_directory(dir))
    throw Error("rule folder '" + dir.string() + "' does not exist; FACT_HOME may point at the wrong tree");
  const std::filesystem::path own = dir / "fragments";
  const FragmentLibrary fragments = std::filesystem::is_directory(own) ? FragmentLibrary::load(own) : FragmentLibrary::builtin();
  // Files only: fragments/ holds pieces of rules, not rules.
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".json") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  PatternRegistry reg;
  for (const auto& f : files) {
    Rule r = parse_rule(read_json_file(f, "rule file"), "rule file '" + f.string() + "'", fragments);
    r.file = f;
    reg.add(std::move(r));
  }
  return reg;
}

PatternRegistry PatternRegistry::builtin() { return load(data_dir() / "rules"); }

const Rule* PatternRegistry::find(const std::string& name) const {
  for (const auto& r : rules_)
    if (r.name == name) return &r;
  return nullptr;
}

std::vector<const Rule*> PatternRegistry::select(const std::string& dtype, const std::string& arch) const {
  std::vector<const Rule*> out;
  for (const auto& r : rules_) {
    bool dtype_ok = std::find(r.dtypes.begin(), r.dtypes.end(), dtype) != r.dtypes.end();
    bool arch_ok = std::find(r.archs.begin(), r.archs.end(), arch) != r.archs.end();
    if (dtype_ok && arch_ok) out.push_back(&r);
  }
  return out;
}

void PatternRegistry::add(Rule rule) {
  if (const Rule* old = find(rule.name))
    throw Error("rule '" + rule.name + "' in '" + rule.file.string() + "' has the same name as the rule in '" +
                old->file.string() + "'; rule names must be unique");
  rules_.push_back(std::move(rule));
}

}  // namespace fact::discover
