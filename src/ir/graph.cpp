#include "ir/graph.h"

#include "core/error.h"
#include "ir/dtype.h"

namespace fact::ir {

int64_t TensorMeta::numel() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

bool TensorMeta::is_contiguous() const {
  if (strides.size() != shape.size()) return false;
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 1) continue;  // a size-1 dim's stride never matters
    if (strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

int64_t TensorMeta::element_bytes() const { return dtype_bytes(dtype); }

const TensorMeta& Node::out(size_t i) const {
  if (i >= outputs.size())
    throw Error("node '" + name + "' has no tensor result " + std::to_string(i) + " (it has " +
                std::to_string(outputs.size()) + ")");
  return outputs[i];
}

const Node* Graph::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &nodes[it->second];
}

const Node& Graph::at(const std::string& name) const {
  const Node* n = find(name);
  if (!n) throw Error("the graph has no node named '" + name + "'");
  return *n;
}

size_t Graph::index_of(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error("the graph has no node named '" + name + "'");
  return it->second;
}

const std::vector<std::string>& Graph::users(const std::string& name) const {
  static const std::vector<std::string> none;
  auto it = users_.find(name);
  return it == users_.end() ? none : it->second;
}

static void add_user(std::vector<std::string>& list, const std::string& user) {
  for (const auto& u : list)
    if (u == user) return;
  list.push_back(user);
}

void Graph::build_index() {
  index_.clear();
  users_.clear();
  for (size_t i = 0; i < nodes.size(); ++i) index_[nodes[i].name] = i;
  for (const auto& n : nodes) {
    if (n.kind != NodeKind::Op) continue;
    for (const auto& used : referenced_names(n)) add_user(users_[used], n.name);
  }
  for (const auto& o : outputs)
    if (is_ref(o)) add_user(users_[ref_name(o)], "<output>");
}

bool is_ref(const Json& arg) { return arg.is_object() && arg.contains("ref") && arg["ref"].is_string(); }

bool is_module_state(const Graph& g, const Node& n) {
  const Node* v = &n;
  while (v->kind == NodeKind::Op && v->category == OpCategory::View && !v->args.empty() && is_ref(v->args[0]))
    v = &g.at(ref_name(v->args[0]));
  return v->kind == NodeKind::Parameter || v->kind == NodeKind::Buffer || v->kind == NodeKind::Constant;
}

const std::string& ref_name(const Json& arg) {
  if (!is_ref(arg)) throw Error("expected a graph value {\"ref\": name}, got " + arg.dump());
  return arg["ref"].get_ref<const std::string&>();
}

static void collect_refs(const Json& v, std::vector<std::string>& out) {
  if (is_ref(v)) {
    out.push_back(ref_name(v));
  } else if (v.is_array()) {
    for (const auto& e : v) collect_refs(e, out);
  }
}

std::vector<std::string> referenced_names(const Node& node) {
  std::vector<std::string> out;
  collect_refs(node.args, out);
  for (const auto& [k, v] : node.kwargs.items()) collect_refs(v, out);
  return out;
}

const char* to_string(NodeKind kind) {
  switch (kind) {
    case NodeKind::Input: return "input";
    case NodeKind::Parameter: return "parameter";
    case NodeKind::Buffer: return "buffer";
    case NodeKind::Constant: return "constant";
    case NodeKind::Op: return "op";
  }
  return "op";
}

}  // namespace fact::ir
