// The built-in planner: no network. It takes discover's ranked plan as it is (row-wise regions no rule covers
// are already entries there, realized by kernels generated from the IR) and names what stays with PyTorch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "agent/agent.h"

namespace fact::agent {

namespace {

class BuiltinPlanner : public Agent {
 public:
  AgentReport run(Tools& tools) override {
    AgentReport r;
    r.agent = "builtin";
    const discover::Plan& plan = tools.plan();
    for (const auto& e : plan.entries) {
      if (e.match.rule == discover::kGeneratedRowwiseRule) {
        std::vector<std::string> ops;
        for (const auto& n : e.match.nodes) ops.push_back(plan.graph.at(n).op);
        r.lines.push_back(fmt::format("generated row-wise kernel for {} ({} ops: {}), estimated gain {:.1f} us",
                                      e.match.anchor, ops.size(), fmt::join(ops, ", "), e.cost.gain_seconds() * 1e6));
        continue;
      }
      bool from_registry = e.match.kernel.value("kind", "") == "generated";
      if (from_registry) r.reused.push_back(e.match.rule);
      r.lines.push_back(fmt::format("plan: {} at {} ({}), estimated gain {:.1f} us", e.match.rule, e.match.anchor,
                                    from_registry ? "registry pattern" : "built-in rule", e.cost.gain_seconds() * 1e6));
    }
    for (const auto& f : rowwise_candidates(plan)) {
      bool generated = std::any_of(plan.entries.begin(), plan.entries.end(), [&](const discover::PlanEntry& e) {
        return e.match.rule == discover::kGeneratedRowwiseRule && e.match.anchor == f.output;
      });
      if (generated) continue;
      auto cost = tools.estimate_cost(f);
      r.lines.push_back(fmt::format("left to PyTorch: row-wise chain {} ({} nodes, estimated {:.1f} -> {:.1f} us fused); "
                                    "no rule covers it; `--agent llm` can generate and verify a kernel for it",
                                    f.output, f.nodes.size(), cost.seconds_now * 1e6, cost.seconds_fused * 1e6));
    }
    if (plan.entries.empty()) r.lines.push_back("plan: no pattern of the registry matched");
    return r;
  }
};

}  // namespace

std::unique_ptr<Agent> make_builtin_planner() { return std::make_unique<BuiltinPlanner>(); }

nlohmann::json AgentReport::to_json() const {
  return {{"format", "fact-agent-report"}, {"version", 1}, {"agent", agent}, {"ok", ok}, {"lines", lines},
          {"registered", registered}, {"reused", reused}, {"details", details}};
}

std::string AgentReport::to_markdown() const {
  std::string md = fmt::format("# FACT agent ({})\n\n", agent);
  for (const auto& l : lines) md += "- " + l + "\n";
  if (!registered.empty()) md += fmt::format("\nRegistered: {}\n", fmt::join(registered, ", "));
  if (!reused.empty()) md += fmt::format("\nReused from the registry: {}\n", fmt::join(reused, ", "));
  if (!ok) md += "\nStopped early: see the last line.\n";
  return md;
}

}  // namespace fact::agent
