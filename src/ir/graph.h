#pragma once
// The IR: a torch.export ATen graph as plain values (see docs/ir-format.md).
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/op_table.h"

namespace fact::ir {

using Json = nlohmann::json;

inline constexpr int kIrVersion = 1;

struct TensorMeta {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  std::string dtype;  // torch short name: float32, bfloat16, ...

  int64_t numel() const;
  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  bool is_contiguous() const;
  int64_t element_bytes() const;  // from dtype
  int64_t bytes() const { return numel() * element_bytes(); }
};

enum class NodeKind { Input, Parameter, Buffer, Constant, Op };

struct Node {
  std::string name;
  NodeKind kind = NodeKind::Op;
  std::string op;       // ATen overload ("aten.mm.default") or "getitem"; empty for non-op nodes
  // FACT's op table's category where it knows the op, else the one the tracer read from PyTorch's tags.
  OpCategory category = OpCategory::Other;
  std::string traced_category;  // as the IR file has it (written back unchanged), empty if absent
  std::string target;   // input name or state_dict key for placeholders
  // A constant forward() makes from Python numbers (torch.tensor(self.value)), not kept by the module: its values
  // (a number, or nested lists), which the composed module makes again; null otherwise.
  Json value = nullptr;
  Json args = Json::array();
  Json kwargs = Json::object();
  std::vector<TensorMeta> outputs;

  const TensorMeta& out(size_t i = 0) const;  // throws Error if the node has no tensor result i
};

struct Graph {
  int version = kIrVersion;
  std::string source_path;
  std::string source_sha256;
  std::string module_class = "Model";
  std::string torch_version;
  std::string trace_device;
  Json init_inputs = Json::array();
  std::vector<Node> nodes;   // topological order
  Json outputs = Json::array();  // forward's results, flattened: refs, or literals for constant results
  // forward's argument/result structure and per-argument guards (docs/ir-format.md "call"); null in old IRs.
  Json call = nullptr;
  // Why the graph cannot be written back as ATen calls (an untraceable module, a higher-order op, ...): FACT
  // then leaves the whole module to PyTorch. Empty when it can.
  std::string replay_blocker;
  // What the tracer rewrote in the graph, or chose not to, and why (an attention mask folded into is_causal); the
  // plan repeats them among its notes.
  std::vector<std::string> notes;

  const Node* find(const std::string& name) const;  // nullptr if absent
  const Node& at(const std::string& name) const;    // throws Error if absent
  size_t index_of(const std::string& name) const;   // throws Error if absent
  // Names of op nodes that take `name` as an argument (once per using node), plus "<output>" if the graph returns it.
  const std::vector<std::string>& users(const std::string& name) const;

  void build_index();  // call after changing `nodes`
 private:
  std::unordered_map<std::string, size_t> index_;
  std::unordered_map<std::string, std::vector<std::string>> users_;
};

// Whether the node's value is module state (a parameter, buffer or constant), itself or through views (t,
// permute, view, ...): the same values on every call until something updates it in place.
bool is_module_state(const Graph& g, const Node& n);

// Helpers on encoded argument values.
bool is_ref(const Json& arg);
const std::string& ref_name(const Json& arg);
// Every node name referenced anywhere in args/kwargs (recursing into lists), in order.
std::vector<std::string> referenced_names(const Node& node);

const char* to_string(NodeKind kind);

}  // namespace fact::ir
