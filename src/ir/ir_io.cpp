#include "ir/ir_io.h"

#include <map>
#include <sstream>

#include "core/error.h"
#include "core/files.h"
#include "ir/dtype.h"

namespace fact::ir {

namespace {

// Names where a node's problem lies, e.g. "IR file 'a.json': node 'mm'" (names are unique).
struct Where {
  std::string origin;
  std::string node;
  std::string str() const { return origin + ": node '" + node + "'"; }
};

const char* json_type(const Json& v) { return v.type_name(); }

const Json& required(const Json& obj, const char* field, const std::string& where) {
  if (!obj.contains(field)) throw Error(where + " is missing field '" + field + "'");
  return obj[field];
}

std::string required_string(const Json& obj, const char* field, const std::string& where) {
  const Json& v = required(obj, field, where);
  if (!v.is_string())
    throw Error(where + " field '" + field + "' must be a string, got " + json_type(v) + " " + v.dump());
  return v.get<std::string>();
}

std::vector<int64_t> int_list(const Json& v, const std::string& where, const char* field) {
  if (!v.is_array()) throw Error(where + " field '" + field + "' must be an array of integers, got " + json_type(v));
  std::vector<int64_t> out;
  for (const auto& e : v) {
    if (!e.is_number_integer())
      throw Error(where + " field '" + field + "' must hold integers, got " + e.dump());
    out.push_back(e.get<int64_t>());
  }
  return out;
}

TensorMeta parse_tensor_meta(const Json& v, const std::string& where) {
  if (!v.is_object()) throw Error(where + " must be an object {shape, strides, dtype}, got " + json_type(v));
  TensorMeta t;
  t.shape = int_list(required(v, "shape", where), where, "shape");
  t.strides = int_list(required(v, "strides", where), where, "strides");
  t.dtype = required_string(v, "dtype", where);
  if (t.strides.size() != t.shape.size())
    throw Error(where + " has " + std::to_string(t.shape.size()) + " dims in 'shape' but " +
                std::to_string(t.strides.size()) + " in 'strides'");
  if (!is_known_dtype(t.dtype))
    throw Error(where + " field 'dtype' is '" + t.dtype +
                "', which is not a torch dtype short name (float32, bfloat16, float16, int64, bool, ...)");
  return t;
}

NodeKind parse_kind(const std::string& s, const std::string& where) {
  if (s == "input") return NodeKind::Input;
  if (s == "parameter") return NodeKind::Parameter;
  if (s == "buffer") return NodeKind::Buffer;
  if (s == "constant") return NodeKind::Constant;
  if (s == "op") return NodeKind::Op;
  throw Error(where + " field 'kind' is '" + s + "'; use input, parameter, buffer, constant or op");
}

// Every {"ref": ...} in an argument must name a node defined earlier.
void check_refs(const Json& v, const std::string& where, const std::string& field,
                const std::map<std::string, size_t>& seen, const std::map<std::string, size_t>& all) {
  if (v.is_object() && v.contains("ref")) {
    if (!v["ref"].is_string())
      throw Error(where + " " + field + " has a ref that is not a string: " + v.dump());
    const std::string& name = v["ref"].get_ref<const std::string&>();
    if (seen.count(name)) return;
    auto later = all.find(name);
    if (later != all.end())
      throw Error(where + " " + field + " refers to '" + name + "', which is defined later (nodes[" +
                  std::to_string(later->second) + "]); nodes must be in topological order");
    throw Error(where + " " + field + " refers to '" + name + "', which no node defines");
  }
  if (v.is_array())
    for (size_t i = 0; i < v.size(); ++i) check_refs(v[i], where, field, seen, all);
}

Node parse_node(const Json& j, const Where& at, const OpTable& ops) {
  const std::string where = at.str();
  Node n;
  n.name = at.node;
  n.kind = parse_kind(required_string(j, "kind", where), where);
  const Json& outs = required(j, "outputs", where);
  if (!outs.is_array()) throw Error(where + " field 'outputs' must be an array, got " + json_type(outs));
  for (size_t i = 0; i < outs.size(); ++i)
    n.outputs.push_back(parse_tensor_meta(outs[i], where + " outputs[" + std::to_string(i) + "]"));
  if (n.kind == NodeKind::Op) {
    n.op = required_string(j, "op", where);
    // Any op is valid: FACT's table names the ones its families care about, PyTorch's tags the rest.
    if (j.contains("category")) {
      if (!j["category"].is_string()) throw Error(where + " field 'category' must be a string");
      try {
        n.traced_category = j["category"].get<std::string>();
        n.category = parse_op_category(n.traced_category);
      } catch (const Error& e) {
        throw Error(where + ": " + e.what());
      }
    }
    if (const OpInfo* info = ops.find(n.op)) n.category = info->category;
    n.args = required(j, "args", where);
    if (!n.args.is_array()) throw Error(where + " field 'args' must be an array, got " + json_type(n.args));
    if (j.contains("kwargs")) {
      n.kwargs = j["kwargs"];
      if (!n.kwargs.is_object())
        throw Error(where + " field 'kwargs' must be an object, got " + json_type(n.kwargs));
    }
  } else {
    n.target = required_string(j, "target", where);
    if (j.contains("value") && !j["value"].is_null()) {
      if (n.kind != NodeKind::Constant || !(j["value"].is_number() || j["value"].is_boolean() || j["value"].is_array()))
        throw Error(where + " field 'value': only a constant node holds one, a number, a boolean or nested lists");
      n.value = j["value"];
    }
  }
  return n;
}

std::string optional_string(const Json& obj, const char* field, const std::string& where) {
  if (!obj.contains(field) || obj[field].is_null()) return "";
  if (!obj[field].is_string()) throw Error(where + " field '" + field + "' must be a string");
  return obj[field].get<std::string>();
}

}  // namespace

Graph parse_graph(const Json& doc, const std::string& origin, const OpTable& ops) {
  if (!doc.is_object()) throw Error(origin + " must hold a JSON object, got " + json_type(doc));
  if (!doc.contains("format") || doc["format"] != "fact-ir")
    throw Error(origin + " is not a FACT IR file (expected \"format\": \"fact-ir\"); write it with python -m fact.trace");
  const Json& version = required(doc, "version", origin);
  if (!version.is_number_integer() || version.get<int64_t>() != kIrVersion)
    throw Error(origin + " has IR version " + version.dump() + ", but this FACT reads version " +
                std::to_string(kIrVersion) + "; re-trace the model with this FACT's python -m fact.trace");
  Graph g;
  g.version = kIrVersion;
  if (doc.contains("source")) {
    const Json& src = doc["source"];
    if (!src.is_object()) throw Error(origin + " field 'source' must be an object {path, sha256, module_class}");
    g.source_path = optional_string(src, "path", origin + " source");
    g.source_sha256 = optional_string(src, "sha256", origin + " source");
    if (auto mc = optional_string(src, "module_class", origin + " source"); !mc.empty()) g.module_class = mc;
  }
  g.torch_version = optional_string(doc, "torch_version", origin);
  g.trace_device = optional_string(doc, "trace_device", origin);
  if (doc.contains("init_inputs")) g.init_inputs = doc["init_inputs"];
  g.replay_blocker = optional_string(doc, "replay_blocker", origin);
  if (doc.contains("notes") && !doc["notes"].is_null()) {
    const Json& notes = doc["notes"];
    if (!notes.is_array()) throw Error(origin + " field 'notes' must be an array of strings");
    for (const auto& note : notes) {
      if (!note.is_string()) throw Error(origin + " field 'notes' must be an array of strings, got " + note.dump());
      g.notes.push_back(note.get<std::string>());
    }
  }
  if (doc.contains("call")) {
    g.call = doc["call"];
    if (!g.call.is_null() && !(g.call.is_object() && g.call.value("inputs", Json()).is_array()))
      throw Error(origin + " field 'call' must be an object {in_spec, out_spec, inputs: [...]}");
  }

  const Json& nodes = required(doc, "nodes", origin);
  if (!nodes.is_array()) throw Error(origin + " field 'nodes' must be an array, got " + json_type(nodes));
  // First pass: names and positions, so a forward reference can be told apart from a dangling one.
  std::map<std::string, size_t> all;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Json& j = nodes[i];
    std::string where = origin + ": nodes[" + std::to_string(i) + "]";
    if (!j.is_object()) throw Error(where + " must be an object, got " + json_type(j));
    std::string name = required_string(j, "name", where);
    if (name.empty()) throw Error(where + " field 'name' is empty");
    if (all.count(name))
      throw Error(where + " reuses the name '" + name + "' of nodes[" + std::to_string(all[name]) +
                  "]; node names must be unique");
    all[name] = i;
  }
  std::map<std::string, size_t> seen;
  for (size_t i = 0; i < nodes.size(); ++i) {
    Where at{origin, nodes[i]["name"].get<std::string>()};
    Node n = parse_node(nodes[i], at, ops);
    check_refs(n.args, at.str(), "args", seen, all);
    for (const auto& [k, v] : n.kwargs.items()) check_refs(v, at.str(), "kwargs['" + k + "']", seen, all);
    seen[n.name] = i;
    g.nodes.push_back(std::move(n));
  }
  const Json& outputs = required(doc, "outputs", origin);
  if (!outputs.is_array()) throw Error(origin + " field 'outputs' must be an array of refs");
  // A result is a node's value, or a literal where forward returns a constant (an int, None).
  for (size_t i = 0; i < outputs.size(); ++i)
    check_refs(outputs[i], origin, "outputs[" + std::to_string(i) + "]", seen, all);
  g.outputs = outputs;
  g.build_index();
  return g;
}

Graph load_graph(const std::filesystem::path& path, const OpTable& ops) {
  return parse_graph(read_json_file(path, "IR file"), "IR file '" + path.string() + "'", ops);
}

Json to_json(const Graph& graph) {
  Json doc = {{"format", "fact-ir"},
              {"version", graph.version},
              {"source", {{"path", graph.source_path}, {"sha256", graph.source_sha256}, {"module_class", graph.module_class}}},
              {"torch_version", graph.torch_version},
              {"trace_device", graph.trace_device},
              {"init_inputs", graph.init_inputs}};
  if (!graph.call.is_null()) doc["call"] = graph.call;
  if (!graph.replay_blocker.empty()) doc["replay_blocker"] = graph.replay_blocker;
  if (!graph.notes.empty()) doc["notes"] = graph.notes;
  Json nodes = Json::array();
  for (const auto& n : graph.nodes) {
    Json j = {{"name", n.name}, {"kind", to_string(n.kind)}};
    if (n.kind == NodeKind::Op) {
      j["op"] = n.op;
      j["args"] = n.args;
      j["kwargs"] = n.kwargs;
      if (!n.traced_category.empty()) j["category"] = n.traced_category;
    } else {
      j["target"] = n.target;
      if (!n.value.is_null()) j["value"] = n.value;
    }
    Json outs = Json::array();
    for (const auto& t : n.outputs) outs.push_back({{"shape", t.shape}, {"strides", t.strides}, {"dtype", t.dtype}});
    j["outputs"] = outs;
    nodes.push_back(std::move(j));
  }
  doc["nodes"] = nodes;
  doc["outputs"] = graph.outputs;
  return doc;
}

namespace {

void format_arg(std::ostream& os, const Json& v) {
  if (is_ref(v)) {
    os << '%' << ref_name(v);
    if (v.contains("index")) os << '[' << v["index"].dump() << ']';
  } else if (v.is_array()) {
    os << '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) os << ", ";
      format_arg(os, v[i]);
    }
    os << ']';
  } else if (v.is_object() && v.size() == 1) {
    // {"float": "-inf"}, {"dtype": "bfloat16"}, ...: print the value alone.
    const auto& inner = v.begin().value();
    os << (inner.is_string() ? inner.get<std::string>() : inner.dump());
  } else {
    os << v.dump();
  }
}

void format_meta(std::ostream& os, const TensorMeta& t) {
  os << t.dtype << '[';
  for (size_t i = 0; i < t.shape.size(); ++i) os << (i ? ", " : "") << t.shape[i];
  os << ']';
  if (!t.is_contiguous()) {
    os << " strides(";
    for (size_t i = 0; i < t.strides.size(); ++i) os << (i ? ", " : "") << t.strides[i];
    os << ')';
  }
}

}  // namespace

std::string format_graph(const Graph& graph) {
  std::ostringstream os;
  os << "# fact-ir v" << graph.version << ", " << graph.nodes.size() << " nodes";
  if (!graph.source_path.empty()) os << ", from " << graph.source_path << " (" << graph.module_class << ")";
  if (!graph.torch_version.empty()) os << ", torch " << graph.torch_version;
  os << '\n';
  for (const auto& n : graph.nodes) {
    os << '%' << n.name << " = ";
    if (n.kind == NodeKind::Op) {
      os << n.op << '(';
      bool first = true;
      for (const auto& a : n.args) {
        os << (first ? "" : ", ");
        format_arg(os, a);
        first = false;
      }
      for (const auto& [k, v] : n.kwargs.items()) {
        os << (first ? "" : ", ") << k << '=';
        format_arg(os, v);
        first = false;
      }
      os << ')';
    } else {
      os << to_string(n.kind) << " '" << n.target << "'";
    }
    os << " : ";
    if (n.outputs.empty()) os << "()";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (i) os << ", ";
      format_meta(os, n.outputs[i]);
    }
    os << '\n';
  }
  os << "return ";
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    if (i) os << ", ";
    format_arg(os, graph.outputs[i]);
  }
  os << '\n';
  return os.str();
}

}  // namespace fact::ir
