#include "discover/pattern_check.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace fact::discover {

using Json = nlohmann::json;

namespace {

// Keys a literal-constraint argument may carry (docs/rule-format.md, "Arguments").
const std::set<std::string> kArgKeys = {"var",  "node", "through", "nullable", "const", "tol", "in",
                                        "any",  "type", "len",     "attr",     "transform", "default"};
const std::set<std::string> kNodeKeys = {"id", "op", "args", "kwargs", "optional", "passthrough",
                                         "attrs", "attrs_if_absent", "alternatives"};

class PatternChecker {
 public:
  PatternChecker(const Json& pattern, const std::string& where) : pattern_(pattern), where_(where) {}

  void check() {
    if (!pattern_.is_object()) throw Error(where_ + " field 'pattern' must be an object {nodes, output}");
    if (!pattern_.contains("nodes") || !pattern_["nodes"].is_array() || pattern_["nodes"].empty())
      throw Error(where_ + " pattern needs a non-empty 'nodes' array");
    for (const auto& n : pattern_["nodes"]) {
      if (!n.is_object()) throw Error(where_ + " pattern.nodes holds a non-object: " + n.dump());
      std::string id = string_field(n, "id", where_ + " pattern node");
      if (id.empty() || id[0] == '$') throw Error(where_ + " pattern node id '" + id + "' must not start with '$'");
      if (!ids_.insert(id).second) throw Error(where_ + " has two pattern nodes with id '" + id + "'");
    }
    for (const auto& n : pattern_["nodes"]) check_node(n);
    std::string out = string_field(pattern_, "output", where_ + " pattern");
    if (!ids_.count(out)) throw Error(where_ + " pattern.output '" + out + "' is not a pattern node id");
    for (const auto& n : pattern_["nodes"])
      if (n["id"] == out && n.value("optional", false))
        throw Error(where_ + " pattern.output '" + out + "' cannot be optional");
    check_extra_outputs(out);
  }

 private:
  const Json& pattern_;
  const std::string& where_;
  std::set<std::string> ids_;

  // extra_outputs: intermediates the graph may also read outside the match; the fused kernel writes them.
  void check_extra_outputs(const std::string& anchor) {
    for (const auto& [k, v] : pattern_.items())
      if (k != "nodes" && k != "output" && k != "extra_outputs")
        throw Error(where_ + " pattern has unknown field '" + k + "' (expected nodes, output, extra_outputs)");
    if (!pattern_.contains("extra_outputs")) return;
    const Json& extra = pattern_["extra_outputs"];
    if (!extra.is_array()) throw Error(where_ + " pattern.extra_outputs must be an array of pattern node ids");
    std::set<std::string> seen;
    for (const auto& e : extra) {
      if (!e.is_string() || !ids_.count(e.get<std::string>()))
        throw Error(where_ + " pattern.extra_outputs entry " + e.dump() + " is not a pattern node id");
      const std::string id = e.get<std::string>();
      if (id == anchor) throw Error(where_ + " pattern.extra_outputs names the anchor '" + id + "', already the output");
      if (!seen.insert(id).second) throw Error(where_ + " pattern.extra_outputs names '" + id + "' twice");
      for (const auto& n : pattern_["nodes"])
        if (n["id"] == id && n.value("optional", false))
          throw Error(where_ + " pattern.extra_outputs names '" + id + "', an optional node; an output must exist");
    }
  }

  void check_form(const Json& form, const std::string& at) {
    if (!form.contains("op")) throw Error(at + " is missing field 'op' (an ATen overload name or a list of them)");
    const Json& op = form["op"];
    if (!(op.is_string() || (op.is_array() && !op.empty() && std::all_of(op.begin(), op.end(), [](const Json& o) { return o.is_string(); }))))
      throw Error(at + " field 'op' must be a string or a non-empty list of strings");
    if (form.contains("args")) {
      if (!form["args"].is_array()) throw Error(at + " field 'args' must be an array");
      for (size_t i = 0; i < form["args"].size(); ++i) check_arg(form["args"][i], at + " args[" + std::to_string(i) + "]");
    }
    if (form.contains("kwargs")) {
      if (!form["kwargs"].is_object()) throw Error(at + " field 'kwargs' must be an object");
      for (const auto& [k, v] : form["kwargs"].items()) check_arg(v, at + " kwargs['" + k + "']");
    }
    if (form.contains("attrs") && !form["attrs"].is_object()) throw Error(at + " field 'attrs' must be an object");
  }

  void check_node(const Json& n) {
    std::string at = where_ + " pattern node '" + n["id"].get<std::string>() + "'";
    for (const auto& [k, v] : n.items())
      if (!kNodeKeys.count(k)) throw Error(at + " has unknown field '" + k + "'");
    if (n.contains("alternatives")) {
      if (n.contains("op") || n.contains("args") || n.contains("kwargs"))
        throw Error(at + " has both 'alternatives' and op/args/kwargs; put each form inside 'alternatives'");
      if (!n["alternatives"].is_array() || n["alternatives"].empty())
        throw Error(at + " field 'alternatives' must be a non-empty array of {op, args, kwargs, attrs}");
      for (size_t i = 0; i < n["alternatives"].size(); ++i)
        check_form(n["alternatives"][i], at + " alternatives[" + std::to_string(i) + "]");
    } else {
      check_form(n, at);
    }
    bool optional = n.value("optional", false);
    if (optional) {
      if (!n.contains("passthrough") || !n["passthrough"].is_string())
        throw Error(at + " is optional, so it needs 'passthrough': the pattern node id or $var that stands in when it is absent");
      check_arg(n["passthrough"], at + " passthrough");
    }
    if (n.contains("attrs_if_absent") && !optional) throw Error(at + " has 'attrs_if_absent' but is not optional");
  }

  void check_ref(const std::string& s, const std::string& at) {
    if (s.empty()) throw Error(at + " is an empty string");
    if (s[0] == '$') return;
    if (!ids_.count(s))
      throw Error(at + " names '" + s + "', which is no pattern node id (write $" + s + " to bind an outside value)");
  }

  void check_arg(const Json& a, const std::string& at) {
    if (a.is_string()) return check_ref(a.get<std::string>(), at);
    if (a.is_array()) {  // a list, matched element by element
      for (size_t i = 0; i < a.size(); ++i) check_arg(a[i], at + "[" + std::to_string(i) + "]");
      return;
    }
    if (!a.is_object()) return;  // a plain literal: must equal
    for (const auto& [k, v] : a.items())
      if (!kArgKeys.count(k)) throw Error(at + " has unknown key '" + k + "'");
    if (a.contains("var")) {
      if (!a["var"].is_string() || a["var"].get<std::string>().rfind("$", 0) != 0)
        throw Error(at + " field 'var' must be a string starting with '$'");
    }
    if (a.contains("node")) {
      if (!a["node"].is_string()) throw Error(at + " field 'node' must be a pattern node id");
      check_ref(a["node"].get<std::string>(), at);
    }
    if (a.contains("through") && !(a.contains("var") || a.contains("node")))
      throw Error(at + " has 'through' without 'var' or 'node'");
    if (a.contains("through") && !a["through"].is_array()) throw Error(at + " field 'through' must be a list of op names");
    if (a.contains("attr") && !a["attr"].is_string()) throw Error(at + " field 'attr' must be an attr name");
    if (a.contains("transform") && a["transform"] != "reciprocal")
      throw Error(at + " field 'transform' must be \"reciprocal\"");
    if (a.contains("in") && !a["in"].is_array()) throw Error(at + " field 'in' must be a list of allowed values");
    if (a.contains("type")) {
      static const std::set<std::string> types = {"number", "int", "bool", "string", "list", "null"};
      if (!a["type"].is_string() || !types.count(a["type"].get<std::string>()))
        throw Error(at + " field 'type' must be one of number, int, bool, string, list, null");
    }
  }
};

}  // namespace

std::string string_field(const Json& doc, const char* field, const std::string& where) {
  if (!doc.contains(field)) throw Error(where + " is missing field '" + field + "'");
  if (!doc[field].is_string()) throw Error(where + " field '" + field + "' must be a string, got " + doc[field].dump());
  return doc[field].get<std::string>();
}

void check_pattern(const Json& pattern, const std::string& where) { PatternChecker(pattern, where).check(); }

}  // namespace fact::discover
