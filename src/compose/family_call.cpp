#include "compose/family_call.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::compose {
namespace {

using nlohmann::json;


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

std::string unserved_extra_output(const discover::Match& m, const realize::KernelFamily& family, const json& config) {
  const auto returns = family.op_returns(config);
  for (const auto& [id, node] : m.extra_outputs) {
    std::string name = kernel_output_of(m, id);
    if (name.empty())
      return fmt::format("the rule's kernel block maps no kernel output to pattern node '{}' (node '{}', read outside "
                         "the pattern); add it to kernel.outputs in the rule file", id, node);
    if (std::find(returns.begin() + 1, returns.end(), name) == returns.end())
      return fmt::format("the tuned {} kernel does not return '{}' (node '{}'), which the graph also reads; tune the "
                         "pattern again", family.name(), name, node);
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
                        const std::string& out, bool channels_last) {
  std::string where = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
  const realize::KernelFamily* family = realize::kernel_family_named(v.family);
  if (!family) throw Error(fmt::format("{}: family '{}' has no composer call", where, v.family));
  const json none = json::object();
  const json& config = v.row.is_object() && v.row.contains("config") ? v.row["config"] : none;
  const json& problem = v.row.is_object() && v.row.contains("problem") ? v.row["problem"] : none;
  if (std::string why = unserved_extra_output(m, *family, config); !why.empty()) throw Error(where + ": " + why);
  realize::OpCallSite site{m, g, problem, config, "torch.ops.fact." + v.op_name, out, where, {}, {}, channels_last};
  site.node = [&](const char* operand) -> const ir::Node* {
    const ir::Node* n = match_operand(m, g, operand);
    return n && !n->outputs.empty() ? n : nullptr;
  };
  site.tensor = [&](const char* operand, bool required) -> std::string {
    if (const ir::Node* n = site.node(operand)) return var(n->name);
    if (required)
      throw Error(fmt::format("{}: the rule's kernel block binds no tensor for operand {}; fix the rule file", where,
                              operand));
    return "None";
  };
  realize::OpCall call = family->op_call(site);
  // The op's results, in its return order, to the anchor's variable and the extra outputs' (unread ones to _).
  const auto returns = family->op_returns(config);
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
  std::string prelude = call.prelude.empty() ? "" : kIndent + call.prelude + "\n";
  return fmt::format("{}# {} ({} nodes) -> FACT kernel {}{}\n{}{}{} = {}  # {}\n", kIndent, m.rule, m.nodes.size(),
                     v.op_name, channels_last ? " (channels-last out: only FACT ops read it)" : "", prelude, kIndent,
                     targets, call.expression, read);
}

}  // namespace fact::compose
