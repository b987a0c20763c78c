#include "realize/kernel_abi_header.h"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/sha256.h"
#include "realize/kernel_builder.h"
#include "realize/kernel_family.h"
#include "realize/template_renderer.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// data/kernel_abi.json: what every family's ABI shares.
struct AbiVocabulary {
  int version = 0;
  std::map<std::string, std::string> c_types;      // vocabulary type -> its C spelling
  std::map<std::string, bool> functions;           // exportable function -> required
  std::vector<std::string> function_order;         // as listed: the export convention's order
};

const AbiVocabulary& vocabulary() {
  static const AbiVocabulary v = [] {
    const fs::path path = data_dir() / "kernel_abi.json";
    const json j = read_json_file(path, "kernel ABI data file");
    auto bad = [&](const std::string& what) { return Error(fmt::format("{}: {}", path.string(), what)); };
    AbiVocabulary out;
    if (!j.contains("version") || !j["version"].is_number_integer() || j["version"].get<int>() < 1)
      throw bad("\"version\" must be an integer >= 1 (FACT_KERNEL_ABI_VERSION)");
    out.version = j["version"].get<int>();
    if (!j.contains("types") || !j["types"].is_object() || j["types"].empty())
      throw bad("\"types\" must map each field type to {\"c\": ..., \"ctypes\": ...}");
    for (const auto& [name, t] : j["types"].items()) {
      if (!t.is_object() || !t.contains("c") || !t["c"].is_string())
        throw bad(fmt::format("types.{}: needs \"c\", the type's C spelling", name));
      out.c_types[name] = t["c"].get<std::string>();
    }
    if (!j.contains("functions") || !j["functions"].is_array())
      throw bad("\"functions\" must list each exportable function as {\"name\": ..., \"required\": true|false}");
    for (const auto& f : j["functions"]) {
      if (!f.is_object() || !f.contains("name") || !f["name"].is_string() || !f.contains("required") ||
          !f["required"].is_boolean())
        throw bad(fmt::format("functions: {} is not {{\"name\": ..., \"required\": true|false}}", f.dump()));
      out.functions[f["name"].get<std::string>()] = f["required"].get<bool>();
      out.function_order.push_back(f["name"].get<std::string>());
    }
    return out;
  }();
  return v;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

// Text that goes inside a C comment must not end it.
bool comment_safe(const std::string& s) {
  return s.find("*/") == std::string::npos && s.find('\n') == std::string::npos;
}

std::string names_of(const std::map<std::string, std::string>& m) {
  std::string out;
  for (const auto& [k, v] : m) out += (out.empty() ? "" : ", ") + k;
  return out;
}

// A field's "type": "int64", or an array "int64[4]" / "int64[FACT_X]" whose length is a number or a constant.
AbiField parse_field(const json& f, size_t i, const FamilyAbi& abi, const std::string& where) {
  const std::string at = fmt::format("{}: abi.fields[{}]", where, i);
  if (!f.is_object()) throw Error(at + ": not an object {\"name\", \"type\"[, \"comment\"]}");
  for (const auto& [key, value] : f.items())
    if (key != "name" && key != "type" && key != "comment")
      throw Error(fmt::format("{}.{}: unknown key; a field has name, type and comment", at, key));
  AbiField out;
  if (!f.contains("name") || !f["name"].is_string() || !is_identifier(f["name"].get<std::string>()))
    throw Error(at + ".name: missing or not a C identifier");
  out.name = f["name"].get<std::string>();
  const std::string field_at = fmt::format("{} (\"{}\")", at, out.name);
  if (!f.contains("type") || !f["type"].is_string())
    throw Error(field_at + ".type: missing; one of " + names_of(vocabulary().c_types) + ", or T[N] for an array");
  std::string type = f["type"].get<std::string>();
  if (auto open = type.find('['); open != std::string::npos) {
    if (type.back() != ']' || open + 2 > type.size() - 1)
      throw Error(fmt::format("{}.type: \"{}\" is not T or T[N]", field_at, type));
    out.count = type.substr(open + 1, type.size() - open - 2);
    type = type.substr(0, open);
    bool number = out.count.size() <= 9 &&
                  std::all_of(out.count.begin(), out.count.end(), [](unsigned char c) { return std::isdigit(c); });
    bool constant = std::any_of(abi.constants.begin(), abi.constants.end(),
                                [&](const auto& c) { return c.first == out.count; });
    if ((number && std::stoll(out.count) < 1) || (!number && !constant))
      throw Error(fmt::format("{}.type: array length \"{}\" is neither a number >= 1 nor a constant of abi.constants",
                              field_at, out.count));
  }
  if (!vocabulary().c_types.count(type))
    throw Error(fmt::format("{}.type: \"{}\" is not a type of the ABI vocabulary ({}; data/kernel_abi.json)", field_at,
                            type, names_of(vocabulary().c_types)));
  out.type = type;
  if (f.contains("comment")) {
    if (!f["comment"].is_string() || !comment_safe(f["comment"].get<std::string>()))
      throw Error(field_at + ".comment: not one line of text (and it may not contain \"*/\")");
    out.comment = f["comment"].get<std::string>();
  }
  return out;
}

}  // namespace

FamilyAbi parse_family_abi(const std::string& family, const json& abi) {
  const std::string where = fmt::format("kernel family '{}' (data/families/{}.json)", family, family);
  if (!abi.is_object())
    throw Error(where + ": \"abi\" is missing or not an object; it describes the family's argument struct "
                        "(docs/kernel-abi.md)");
  for (const auto& [key, value] : abi.items())
    if (key != "struct" && key != "doc" && key != "constants" && key != "fields" && key != "functions")
      throw Error(
          fmt::format("{}: abi.{}: unknown key; allowed: struct, doc, constants, fields, functions", where, key));
  FamilyAbi out;
  out.family = family;
  if (!abi.contains("struct") || !abi["struct"].is_string() || !is_identifier(abi["struct"].get<std::string>()))
    throw Error(where + ": abi.struct: missing or not a C identifier (the struct's name, e.g. FactGemmArgs)");
  out.struct_name = abi["struct"].get<std::string>();
  if (!abi.contains("doc") || !abi["doc"].is_array() || abi["doc"].empty())
    throw Error(where + ": abi.doc: missing; the struct's semantics, a list of lines");
  for (size_t i = 0; i < abi["doc"].size(); ++i) {
    const json& line = abi["doc"][i];
    if (!line.is_string() || !comment_safe(line.get<std::string>()))
      throw Error(fmt::format("{}: abi.doc[{}]: not one line of text (and it may not contain \"*/\")", where, i));
    out.doc.push_back(line.get<std::string>());
  }
  if (abi.contains("constants")) {
    if (!abi["constants"].is_object()) throw Error(where + ": abi.constants: not an object {NAME: integer}");
    for (const auto& [name, value] : abi["constants"].items()) {
      if (!is_identifier(name)) throw Error(fmt::format("{}: abi.constants.{}: not a C identifier", where, name));
      if (!value.is_number_integer() || value.get<int64_t>() < 1)
        throw Error(fmt::format("{}: abi.constants.{}: {} is not an integer >= 1", where, name, value.dump()));
      out.constants.emplace_back(name, value.get<int64_t>());
    }
  }
  if (!abi.contains("fields") || !abi["fields"].is_array() || abi["fields"].empty())
    throw Error(where + ": abi.fields: missing; the struct's members in memory order");
  std::set<std::string> names;
  for (size_t i = 0; i < abi["fields"].size(); ++i) {
    out.fields.push_back(parse_field(abi["fields"][i], i, out, where));
    if (!names.insert(out.fields.back().name).second)
      throw Error(fmt::format("{}: abi.fields[{}] (\"{}\"): a second field of that name", where, i,
                              out.fields.back().name));
  }
  const AbiVocabulary& v = vocabulary();
  if (!abi.contains("functions") || !abi["functions"].is_array())
    throw Error(where + ": abi.functions: missing; the functions each kernel exports (e.g. [\"can_implement\", "
                        "\"run\", \"describe\"])");
  std::set<std::string> exported;
  for (size_t i = 0; i < abi["functions"].size(); ++i) {
    const json& f = abi["functions"][i];
    if (!f.is_string() || !v.functions.count(f.get<std::string>()))
      throw Error(fmt::format("{}: abi.functions[{}]: {} is not one of {}", where, i, f.dump(),
                              fmt::join(v.function_order, ", ")));
    if (!exported.insert(f.get<std::string>()).second)
      throw Error(fmt::format("{}: abi.functions[{}]: {} is listed twice", where, i, f.dump()));
  }
  for (const auto& name : v.function_order) {
    if (exported.count(name)) out.functions.push_back(name);
    else if (v.functions.at(name))
      throw Error(fmt::format("{}: abi.functions: lacks \"{}\", which every kernel exports", where, name));
  }
  return out;
}

FamilyAbi family_abi(const std::string& family) {
  const json data = family_data(family);
  return parse_family_abi(family, data.contains("abi") ? data["abi"] : json(nullptr));
}

int kernel_abi_version() { return vocabulary().version; }

std::string render_family_abi(const FamilyAbi& abi) {
  std::string doc = "/* ";
  for (size_t i = 0; i < abi.doc.size(); ++i) doc += (i ? "\n * " : "") + abi.doc[i];
  doc += " */";
  std::string constants;
  for (const auto& [name, value] : abi.constants) constants += fmt::format("#define {} {}\n", name, value);
  std::vector<std::string> decls;
  size_t width = 0;
  for (const auto& f : abi.fields) {
    decls.push_back(fmt::format("{} {}{};", vocabulary().c_types.at(f.type), f.name,
                                f.count.empty() ? "" : "[" + f.count + "]"));
    width = std::max(width, decls.back().size());
  }
  std::string fields;
  for (size_t i = 0; i < abi.fields.size(); ++i) {
    const auto& comment = abi.fields[i].comment;
    fields += comment.empty() ? fmt::format("  {}\n", decls[i])
                              : fmt::format("  {:<{}} /* {} */\n", decls[i], width, comment);
  }
  if (!fields.empty()) fields.pop_back();  // the template puts the struct's closing line on its own line
  return render_template_file("abi/family_args.h.in", {{"doc", doc},
                                                       {"constants", constants},
                                                       {"struct", abi.struct_name},
                                                       {"fields", fields}});
}

std::string kernel_abi_header() {
  static const std::string header = [] {
    std::string structs;
    std::map<std::string, std::string> declared;  // struct or constant -> the family declaring it
    for (const KernelFamily* family : kernel_families()) {
      FamilyAbi abi = family_abi(family->name());
      std::vector<std::string> names = {abi.struct_name};
      for (const auto& c : abi.constants) names.push_back(c.first);
      for (const auto& n : names)
        if (auto [it, fresh] = declared.emplace(n, abi.family); !fresh)
          throw Error(fmt::format("kernel families '{}' and '{}' both declare {} in their \"abi\"; rename one",
                                  it->second, abi.family, n));
      std::string functions;
      for (const auto& f : abi.functions) functions += (functions.empty() ? "" : ", ") + ("fact_<id>_" + f);
      structs += render_family_abi(abi) + "\n" +
                 render_template_file("abi/family_exports.h.in", {{"family", abi.family}, {"functions", functions}}) +
                 "\n";
    }
    return render_template_file("abi/kernel_abi.h.in",
                                {{"abi_version", std::to_string(kernel_abi_version())}, {"family_structs", structs}});
  }();
  return header;
}

fs::path write_kernel_abi_include(const fs::path& root, const std::string& header) {
  static std::mutex mu;  // one writer per process; the pid names its temporary among processes
  const fs::path dir = root / sha256_hex(header).substr(0, 16);
  const fs::path file = dir / "kernel_abi.h";
  std::lock_guard<std::mutex> lock(mu);
  std::error_code ec;
  if (fs::exists(file, ec) && read_text_file(file, "kernel ABI header") == header) return dir;
  // Another process may write the same file at once: each writes its own temporary, the renames agree.
  const fs::path tmp = dir / fmt::format("kernel_abi.h.{}", static_cast<long>(getpid()));
  write_file_atomic(tmp, header);
  fs::rename(tmp, file, ec);
  if (ec)
    throw Error(fmt::format("cannot write the kernel ABI header {}: {}; set FACT_KERNEL_CACHE to a writable folder",
                            file.string(), ec.message()));
  return dir;
}

fs::path kernel_abi_include_dir() {
  return write_kernel_abi_include(default_kernel_cache_dir() / "include", kernel_abi_header());
}

}  // namespace fact::realize
