#include "compose/family_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"

namespace fact::compose {
namespace {

using nlohmann::json;

constexpr const char* kIndent = "        ";

// A scalar of the tuned problem (the row the verdict accepted); the kernel was verified with it.
json problem_field(const PatternVerdict& v, const char* key, bool boolean, const std::string& where) {
  json value = v.row.is_object() && v.row.contains("problem") && v.row["problem"].is_object()
                   ? v.row["problem"].value(key, json(nullptr))
                   : json(nullptr);
  if (boolean ? !value.is_boolean() : !value.is_number())
    throw Error(fmt::format("{}: the tune report's problem has no {} \"{}\"; tune the pattern again", where,
                            boolean ? "boolean" : "number", key));
  return value;
}

// The values a family op returns, in order: the anchor's first, then what the config also writes.
std::vector<std::string> op_returns(const std::string& family, const json& config) {
  if (family == "normalization" && config.is_object() && config.value("store_sum", false)) return {"y", "sum"};
  return {"anchor"};
}

// The kernel output the rule's kernel block maps to pattern node `id` ("outputs": {"sum": "sum"}), or "".
std::string kernel_output_of(const discover::Match& m, const std::string& id) {
  const json outputs = m.kernel.value("outputs", json::object());
  for (const auto& [name, node] : outputs.items())
    if (node == id) return name;
  return "";
}

}  // namespace

std::map<std::string, std::string> extra_output_variables(const discover::Match& m, const std::string& out) {
  std::map<std::string, std::string> vars;
  for (const auto& [id, node] : m.extra_outputs) {
    std::string name = kernel_output_of(m, id);
    vars[node] = out + "_" + (name.empty() ? id : name);
  }
  return vars;
}

std::string unserved_extra_output(const discover::Match& m, const std::string& family, const json& config) {
  const auto returns = op_returns(family, config);
  for (const auto& [id, node] : m.extra_outputs) {
    std::string name = kernel_output_of(m, id);
    if (name.empty())
      return fmt::format("the rule's kernel block maps no kernel output to pattern node '{}' (node '{}', read outside "
                         "the pattern); add it to kernel.outputs in the rule file", id, node);
    if (std::find(returns.begin() + 1, returns.end(), name) == returns.end())
      return fmt::format("the tuned {} kernel does not return '{}' (node '{}'), which the graph also reads; tune the "
                         "pattern again", family, name, node);
  }
  return "";
}

const ir::Node* match_operand(const discover::Match& m, const ir::Graph& g, const char* operand) {
  const json ops = m.kernel.value("operands", json::object());
  if (!ops.contains(operand) || !ops[operand].is_string()) return nullptr;
  std::string v = ops[operand];
  auto it = m.inputs.find(v);
  if (it == m.inputs.end() && !v.empty() && v[0] == '$') it = m.inputs.find(v.substr(1));
  if (it == m.inputs.end() || it->second.empty()) return nullptr;
  return g.find(it->second);
}

std::string family_call(const discover::Match& m, const PatternVerdict& v, const ir::Graph& g, const VariableOf& var,
                        const std::string& out) {
  std::string where = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  auto tensor = [&](const char* operand, bool required) -> std::string {
    const ir::Node* n = match_operand(m, g, operand);
    if (!n || n->outputs.empty()) {
      if (required)
        throw Error(fmt::format("{}: the rule's kernel block binds no tensor for operand {}; fix the rule file", where,
                                operand));
      return "None";
    }
    return var(n->name);
  };
  const json config = v.row.is_object() ? v.row.value("config", json::object()) : json::object();
  if (std::string why = unserved_extra_output(m, v.family, config); !why.empty()) throw Error(where + ": " + why);
  std::string call;
  if (v.family == "normalization") {
    // (x, residual, weight, bias, eps); a config that also writes x + residual returns (y, sum), y the anchor.
    call = fmt::format("torch.ops.fact.{}({}, {}, {}, {}, {})", v.op_name, tensor("x", true),
                       tensor("residual", false), tensor("weight", false), tensor("bias", false),
                       python_float(problem_field(v, "eps", false, where).get<double>()));
  } else if (v.family == "attention") {
    // q, k, v as the module's views (read in place through their strides; for grouped-query attention the rule
    // binds K/V before their expand, so heads_kv < heads). O is the [B, H, T, D] view of a [B, T, H, D] tensor,
    // so the module's following transpose(1, 2).contiguous() copies nothing.
    call = fmt::format("torch.ops.fact.{}({}, {}, {}, {}, {})", v.op_name, tensor("q", true), tensor("k", true),
                       tensor("v", true), python_float(problem_field(v, "scale", false, where).get<double>()),
                       problem_field(v, "causal", true, where).get<bool>() ? "True" : "False");
  } else if (v.family == "rope") {
    // x as the module's view (read in place through its strides), cos/sin as the module's [seq, D] tables; the
    // result has x's shape in the layout PyTorch's elementwise ops give (x's dim order), as the anchor had.
    call = fmt::format("torch.ops.fact.{}({}, {}, {})", v.op_name, tensor("x", true), tensor("cos", true),
                       tensor("sin", true));
  } else if (v.family == "rowwise") {
    // The registered kernel's inputs in the rule's order ($in0, $in1, ...), as the module's tensors; the op
    // returns a contiguous tensor shaped like the first full input (the anchor's shape for a row-wise chain).
    const json broadcast = config.value("broadcast", json::array());
    if (!broadcast.is_array() || broadcast.empty())
      throw Error(where + ": the tune report's config lists no inputs (\"broadcast\"); tune the pattern again");
    std::string args;
    for (size_t i = 0; i < broadcast.size(); ++i)
      args += (i ? ", " : "") + tensor(fmt::format("in{}", i).c_str(), true);
    call = fmt::format("torch.ops.fact.{}({})", v.op_name, args);
  } else {
    throw Error(fmt::format("{}: family '{}' has no composer call", where, v.family));
  }
  // The op's results, in its return order, to the anchor's variable and the extra outputs' (unread ones to _).
  const auto returns = op_returns(v.family, config);
  std::string targets = out, read = m.anchor;
  if (returns.size() > 1) {
    std::map<std::string, std::string> by_output;  // kernel output -> graph node it stands for
    for (const auto& [id, node] : m.extra_outputs) by_output[kernel_output_of(m, id)] = node;
    const auto vars = extra_output_variables(m, out);
    for (size_t i = 1; i < returns.size(); ++i) {
      auto it = by_output.find(returns[i]);
      targets += ", " + (it == by_output.end() ? std::string("_") : vars.at(it->second));
      if (it != by_output.end()) read += ", " + it->second;
    }
  }
  return fmt::format("{}# {} ({} nodes) -> FACT kernel {}\n{}{} = {}  # {}\n", kIndent, m.rule, m.nodes.size(),
                     v.op_name, kIndent, targets, call, read);
}

}  // namespace fact::compose
