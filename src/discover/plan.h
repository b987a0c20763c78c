#pragma once
// The discovery plan: the non-overlapping matches ranked by expected gain, with their cost
// estimates, as a table for people and as JSON for stage 2 (the IR is embedded, so the plan stands alone).
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/arch_spec.h"
#include "discover/cost_model.h"
#include "discover/match.h"
#include "discover/pattern_registry.h"
#include "ir/graph.h"
#include "ir/op_table.h"

namespace fact::discover {

inline constexpr int kPlanVersion = 1;

struct PlanEntry {
  Match match;
  CostEstimate cost;
};

struct Plan {
  Arch arch = Arch::sm90;
  Numerics numerics = Numerics::x3tf32;
  // fp32 convolutions' numerics, apart from the matmuls' as in PyTorch (torch.backends.cudnn.allow_tf32, on by
  // default, against torch.backends.cuda.matmul.allow_tf32, off): tf32, or x3tf32 for fp32-accurate convolutions
  // measured against cuDNN with TF32 off. A tf32, bf16 or fp16 plan's convolutions take the plan's numerics.
  Numerics conv_numerics = Numerics::tf32;
  ir::Graph graph;
  std::vector<PlanEntry> entries;           // sorted by expected gain, largest first
  double seconds_now = 0;                   // whole module in PyTorch (estimate)
  double seconds_planned = 0;               // with every entry fused (estimate)
  std::map<std::string, int> uncovered_ops; // op -> count of op nodes no entry covers (views excluded)
  std::vector<std::string> notes;           // rules skipped on a node, estimates left out, and why
};

// Numerics mode to plan for when the user names none: the graph's floating dtype decides
// (bfloat16 -> bf16, float16 -> fp16, float32 -> 3xtf32, which keeps fp32 accuracy).
Numerics default_numerics(const ir::Graph& graph);

Plan make_plan(const ir::Graph& graph, const PatternRegistry& registry, const ir::OpTable& ops,
               const ArchSpec& arch, Numerics numerics, Numerics conv_numerics = Numerics::tf32);

// The numerics a pattern of `family` is realized in: the plan's, except an fp32-accurate plan's convolutions, which
// take conv_numerics.
Numerics family_numerics(const Plan& plan, const std::string& family, Numerics numerics);

// The plan's "left to PyTorch" line: the ops no entry covers, or the whole module and why.
std::string left_to_pytorch(const Plan& plan);
nlohmann::json to_json(const Plan& plan);
// Reads a plan written by to_json; throws Error naming the file and field on malformed input.
Plan plan_from_json(const nlohmann::json& doc, const std::string& origin, const ir::OpTable& ops);
std::string format_plan(const Plan& plan);

}  // namespace fact::discover
