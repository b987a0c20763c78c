#include "discover/channels_last_chain.h"

#include <set>
#include <string>
#include <vector>

#include "ir/op_table.h"

namespace fact::discover {

bool keeps_channels_last(const ir::Node& n) {
  const ir::OpInfo* info = ir::OpTable::builtin().find(n.op);
  return n.op == "getitem" || n.category == ir::OpCategory::Elementwise || (info && info->channels_last);
}

bool fed_by_own_family(const Plan& plan, size_t entry, const std::function<bool(size_t)>& chains) {
  const Match& m = plan.entries.at(entry).match;
  const nlohmann::json var = m.kernel.value("operands", nlohmann::json::object()).value("x", nlohmann::json());
  if (!var.is_string()) return false;
  auto bound = m.inputs.find(var.get<std::string>());
  if (bound == m.inputs.end() || bound->second.empty()) return false;
  // The values the family's other chaining entries compute, and those any other entry computes (a FACT op that
  // writes PyTorch's order: the walk stops there rather than pass through the ops it covers).
  std::set<std::string> anchors, others;
  for (size_t i = 0; i < plan.entries.size(); ++i)
    if (i != entry)
      (plan.entries[i].match.family == m.family && chains(i) ? anchors : others).insert(plan.entries[i].match.anchor);
  std::vector<std::string> todo = {bound->second};
  std::set<std::string> seen = {bound->second};
  while (!todo.empty()) {
    std::string value = todo.back();
    todo.pop_back();
    if (anchors.count(value)) return true;
    if (others.count(value)) continue;
    const ir::Node* n = plan.graph.find(value);
    if (!n || n->kind != ir::NodeKind::Op || !keeps_channels_last(*n)) continue;
    for (const auto& in : ir::referenced_names(*n))
      if (seen.insert(in).second) todo.push_back(in);
  }
  return false;
}

}  // namespace fact::discover
