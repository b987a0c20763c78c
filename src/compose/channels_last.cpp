#include "compose/channels_last.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::compose {
namespace {

using nlohmann::json;

// The verdict's family's channels-last support for its tuned problem and config (none where they do not parse).
realize::ChannelsLast support_of(const PatternVerdict& v) {
  const realize::KernelFamily* family = realize::kernel_family_named(v.family);
  if (!family || !v.row.is_object() || !v.row.contains("problem") || !v.row.contains("config")) return {};
  try {
    return family->channels_last(v.row["problem"], v.row["config"]);
  } catch (const Error&) {
    return {};
  }
}

// Whether every pattern variable of `reader` bound to graph node `value` is the variable of an operand it reads
// channels-last.
bool reads_in_place(const discover::Match& reader, const realize::ChannelsLast& support, const std::string& value) {
  const json operands = reader.kernel.value("operands", json::object());
  for (const auto& [var, node] : reader.inputs) {
    if (node != value) continue;
    bool in_place = std::any_of(support.reads.begin(), support.reads.end(), [&](const std::string& operand) {
      if (!operands.contains(operand) || !operands[operand].is_string()) return false;
      std::string bound = operands[operand];
      return bound == var || bound == "$" + var || "$" + bound == var;
    });
    if (!in_place) return false;
  }
  return true;
}

}  // namespace

std::set<std::string> channels_last_anchors(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts) {
  const ir::Graph& g = plan.graph;
  std::map<std::string, const PatternVerdict*> covered_by;  // covered node -> its accepted verdict
  std::map<const PatternVerdict*, realize::ChannelsLast> support;
  for (const auto& v : verdicts) {
    if (!v.accepted) continue;
    for (const auto& n : plan.entries[v.entry].match.nodes) covered_by[n] = &v;
    support[&v] = support_of(v);
  }
  std::set<std::string> out;
  for (const auto& [v, s] : support) {
    const discover::Match& m = plan.entries[v->entry].match;
    if (!s.writes || !m.extra_outputs.empty() || g.users(m.anchor).empty()) continue;
    bool only_in_place = true;
    for (const auto& user : g.users(m.anchor)) {
      auto it = covered_by.find(user);  // "<output>" and PyTorch's ops are covered by none
      if (it == covered_by.end() || it->second == v ||
          !reads_in_place(plan.entries[it->second->entry].match, support.at(it->second), m.anchor)) {
        only_in_place = false;
        break;
      }
    }
    if (only_in_place) out.insert(m.anchor);
  }
  return out;
}

}  // namespace fact::compose
