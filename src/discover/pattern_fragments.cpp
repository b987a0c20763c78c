#include "discover/pattern_fragments.h"

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "discover/pattern_check.h"

namespace fact::discover {

using Json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Fields of a node that uses a fragment; the last three are set on the fragment's output node.
const std::set<std::string> kUseKeys = {"id", "fragment", "vars", "ids", "optional", "passthrough", "attrs_if_absent"};
const std::set<std::string> kOutputNodeKeys = {"optional", "passthrough", "attrs_if_absent"};
// Fields of an alternatives entry that splices in the forms of a one-node fragment.
const std::set<std::string> kFormUseKeys = {"fragment", "vars"};

// Where a pattern names another node or a $var (docs/rule-format.md, "Arguments"): a plain string, or the
// "var" / "node" field of an argument object. Renaming must keep the var field a $var.
enum class RefKind { plain, var_field, node_field };
using RefVisitor = std::function<void(Json& ref, RefKind kind)>;

void visit_arg(Json& a, const RefVisitor& f) {
  if (a.is_string()) return f(a, RefKind::plain);
  if (a.is_array()) {
    for (auto& e : a) visit_arg(e, f);
    return;
  }
  if (!a.is_object()) return;
  if (a.contains("var") && a["var"].is_string()) f(a["var"], RefKind::var_field);
  if (a.contains("node") && a["node"].is_string()) f(a["node"], RefKind::node_field);
}

void visit_form(Json& form, const RefVisitor& f) {
  if (form.contains("args")) visit_arg(form["args"], f);
  if (form.contains("kwargs"))
    for (auto& v : form["kwargs"]) visit_arg(v, f);
}

void visit_refs(Json& node, const RefVisitor& f) {
  if (node.contains("passthrough") && node["passthrough"].is_string()) f(node["passthrough"], RefKind::plain);
  if (node.contains("alternatives")) {
    for (auto& form : node["alternatives"]) visit_form(form, f);
  } else {
    visit_form(node, f);
  }
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) s += (s.empty() ? "" : ", ") + n;
  return s.empty() ? "none" : s;
}

void check_keys(const Json& doc, const std::set<std::string>& allowed, const std::string& at) {
  for (const auto& [k, v] : doc.items())
    if (!allowed.count(k))
      throw Error(at + " has field '" + k + "', which a fragment use does not take (allowed: " +
                  joined({allowed.begin(), allowed.end()}) + ")");
}

std::map<std::string, std::string> string_map(const Json& use, const char* field, const std::string& at) {
  std::map<std::string, std::string> out;
  if (!use.contains(field)) return out;
  if (!use[field].is_object()) throw Error(at + " field '" + field + "' must be an object: fragment name -> new name");
  for (const auto& [k, v] : use[field].items()) {
    if (!v.is_string() || v.get<std::string>().empty())
      throw Error(at + " field '" + field + "' maps '" + k + "' to " + v.dump() + "; expected a non-empty string");
    out[k] = v.get<std::string>();
  }
  return out;
}

// One use of a fragment, parsed: its name and renames.
struct Use {
  std::string name;
  std::map<std::string, std::string> vars;  // fragment $var -> rule $var or pattern node id
  std::map<std::string, std::string> ids;   // fragment node id (not the output) -> new id
};

Use parse_use(const Json& use, const std::set<std::string>& allowed, const std::string& at) {
  check_keys(use, allowed, at);
  return {string_field(use, "fragment", at), string_map(use, "vars", at), string_map(use, "ids", at)};
}

// How errors name a use: `node` is the using node or alternatives entry.
std::string use_label(const std::string& at, const Json& node) {
  const Json& f = node["fragment"];
  return at + " (fragment '" + (f.is_string() ? f.get<std::string>() : f.dump()) + "')";
}

[[noreturn]] void throw_unknown(const std::string& name, const std::string& at, const fs::path& dir,
                                const std::vector<std::string>& known) {
  throw Error(at + ": no fragment '" + name + "' in " + dir.string() + " (it holds: " + joined(known) +
              "); a fragment is the file <name>.json there");
}

// The fragment's nodes as one use names them: the output takes `id`, the other nodes keep their ids unless
// the use renames them, and each $var becomes what the use maps it to.
Json instantiate(const Json& fragment_nodes, const std::string& output, const std::set<std::string>& fragment_vars,
                 const std::string& id, const Use& use, const std::string& at) {
  std::map<std::string, std::string> ids;
  for (const auto& n : fragment_nodes) ids[n["id"].get<std::string>()] = n["id"].get<std::string>();
  for (const auto& [from, to] : use.vars)
    if (!fragment_vars.count(from))
      throw Error(at + " renames '" + from + "', which the fragment does not use (its vars: " +
                  joined({fragment_vars.begin(), fragment_vars.end()}) + ")");
  for (const auto& [from, to] : use.ids) {
    if (!ids.count(from) || from == output) {
      std::vector<std::string> inner;
      for (const auto& [k, v] : ids)
        if (k != output) inner.push_back(k);
      throw Error(at + " renames node '" + from + "', which is no inner node of the fragment (its inner nodes: " +
                  joined(inner) + "; the use's id names the output)");
    }
    if (to[0] == '$') throw Error(at + " renames node '" + from + "' to '" + to + "'; a node id must not start with '$'");
    ids[from] = to;
  }
  ids[output] = id;
  Json nodes = fragment_nodes;
  for (auto& n : nodes) {
    n["id"] = ids.at(n["id"].get<std::string>());
    visit_refs(n, [&](Json& ref, RefKind kind) {
      const std::string name = ref.get<std::string>();
      if (name[0] != '$') {
        ref = ids.at(name);  // the fragment was checked: it names only its own nodes
        return;
      }
      auto it = use.vars.find(name);
      if (it == use.vars.end()) return;
      if (kind == RefKind::var_field && it->second[0] != '$')
        throw Error(at + " maps " + name + " to node '" + it->second + "', but the fragment reads " + name +
                    " as {\"var\": ...} (nullable or looked through), which binds only a $var");
      ref = it->second;
    });
  }
  return nodes;
}

}  // namespace

Json FragmentLibrary::expand_nodes(const Json& nodes, const std::string& where, const Lookup& lookup) {
  if (!nodes.is_array()) return nodes;  // check_pattern says what is wrong
  Json out = Json::array();
  std::map<std::string, std::string> origin_of;  // node id -> the use that brought it ("" if written out)
  auto add = [&](Json node, const std::string& origin) {
    if (node.is_object() && node.contains("id") && node["id"].is_string()) {
      const std::string id = node["id"].get<std::string>();
      auto [it, fresh] = origin_of.emplace(id, origin);
      const std::string& from = origin.empty() ? it->second : origin;
      if (!fresh && !from.empty())
        throw Error(from + " brings node '" + id + "', which the pattern already has; rename it with \"ids\": {\"" + id +
                    "\": \"...\"}");
    }
    out.push_back(std::move(node));
  };
  for (const auto& node : nodes) {
    if (!node.is_object()) {
      add(node, "");
      continue;
    }
    if (node.contains("fragment")) {
      const std::string id = string_field(node, "id", where + " pattern node");
      const std::string at = use_label(where + " pattern node '" + id + "'", node);
      const Use use = parse_use(node, kUseKeys, at);
      const auto& f = lookup(use.name, at);
      Json expanded = instantiate(f.nodes, f.output, f.vars, id, use, at);
      for (auto& n : expanded) {
        const bool is_output = n["id"] == id;
        if (is_output)
          for (const auto& key : kOutputNodeKeys)
            if (node.contains(key)) {
              if (n.contains(key)) throw Error(at + " sets '" + key + "', which the fragment already sets");
              n[key] = node[key];
            }
        add(std::move(n), is_output ? "" : at);
      }
      continue;
    }
    Json written = node;
    if (node.contains("alternatives") && node["alternatives"].is_array()) {
      const std::string id = node.value("id", std::string("?"));
      Json forms = Json::array();
      for (size_t i = 0; i < node["alternatives"].size(); ++i) {
        const Json& form = node["alternatives"][i];
        if (!form.is_object() || !form.contains("fragment")) {
          forms.push_back(form);
          continue;
        }
        const std::string at = use_label(where + " pattern node '" + id + "' alternatives[" + std::to_string(i) + "]", form);
        const Use use = parse_use(form, kFormUseKeys, at);
        const auto& f = lookup(use.name, at);
        if (f.nodes.size() != 1)
          throw Error(at + ": only a one-node fragment can stand among alternatives; this one has " +
                      std::to_string(f.nodes.size()) + " nodes");
        Json one = instantiate(f.nodes, f.output, f.vars, id, use, at)[0];
        for (const auto& key : kOutputNodeKeys)
          if (one.contains(key)) throw Error(at + ": the fragment sets '" + key + "', which a form cannot carry");
        if (one.contains("alternatives")) {
          for (auto& g : one["alternatives"]) forms.push_back(std::move(g));
        } else {
          one.erase("id");
          forms.push_back(std::move(one));
        }
      }
      written["alternatives"] = std::move(forms);
    }
    add(std::move(written), "");
  }
  return out;
}

FragmentLibrary::Fragment FragmentLibrary::parse(const fs::path& file, const Lookup& lookup) {
  const std::string origin = "fragment file '" + file.string() + "'";
  Json doc = read_json_file(file, "fragment file");
  if (!doc.is_object()) throw Error(origin + " must hold a JSON object {description, nodes, output}");
  for (const auto& [k, v] : doc.items())
    if (k != "description" && k != "nodes" && k != "output")
      throw Error(origin + " has unknown field '" + k + "' (expected description, nodes, output)");
  string_field(doc, "description", origin);
  Json pattern = {{"nodes", expand_nodes(doc.value("nodes", Json()), origin, lookup)}};
  if (doc.contains("output")) pattern["output"] = doc["output"];
  check_pattern(pattern, origin);
  Fragment f{pattern["nodes"], pattern["output"].get<std::string>(), {}};
  for (auto& n : pattern["nodes"])
    visit_refs(n, [&](Json& ref, RefKind) {
      if (ref.get<std::string>()[0] == '$') f.vars.insert(ref.get<std::string>());
    });
  return f;
}

FragmentLibrary FragmentLibrary::load(const fs::path& dir) {
  FragmentLibrary lib;
  lib.dir_ = dir;
  if (!fs::is_directory(dir)) return lib;
  std::map<std::string, fs::path> file_of;  // by name, so fragments load in name order
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".json") file_of[entry.path().stem().string()] = entry.path();

  // Fragments may use fragments: each is expanded on first use; `open` holds those being expanded.
  std::vector<std::string> open;
  Lookup resolve = [&](const std::string& name, const std::string& at) -> const Fragment& {
    if (auto it = lib.fragments_.find(name); it != lib.fragments_.end()) return it->second;
    if (!file_of.count(name)) {
      std::vector<std::string> known;
      for (const auto& [n, f] : file_of) known.push_back(n);
      throw_unknown(name, at, dir, known);
    }
    if (std::find(open.begin(), open.end(), name) != open.end())
      throw Error(at + " uses fragment '" + name + "' inside itself (" + joined(open) + ")");
    open.push_back(name);
    Fragment f = parse(file_of.at(name), resolve);
    open.pop_back();
    return lib.fragments_.emplace(name, std::move(f)).first->second;
  };
  for (const auto& [name, file] : file_of) resolve(name, "fragment file '" + file.string() + "'");
  return lib;
}

FragmentLibrary FragmentLibrary::builtin() { return load(data_dir() / "rules" / "fragments"); }

Json FragmentLibrary::expand(const Json& pattern, const std::string& where) const {
  if (!pattern.is_object() || !pattern.contains("nodes")) return pattern;  // check_pattern says what is wrong
  Json out = pattern;
  out["nodes"] = expand_nodes(pattern["nodes"], where, [this](const std::string& name, const std::string& at) -> const Fragment& {
    auto it = fragments_.find(name);
    if (it == fragments_.end()) {
      std::vector<std::string> known;
      for (const auto& [n, f] : fragments_) known.push_back(n);
      throw_unknown(name, at, dir_, known);
    }
    return it->second;
  });
  return out;
}

}  // namespace fact::discover
