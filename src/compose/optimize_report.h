#pragma once
// The report of `fact optimize`: report.json's "e2e" object (the composed module against eager and both
// torch.compile modes, one numerics setting) and "patterns" list (each plan entry: FACT's kernel or
// PyTorch's ops, and why), and report.md with both tables. Generic over pattern families.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "compose/pattern_verdicts.h"
#include "discover/plan.h"

namespace fact::compose {

// The "e2e" object from an e2e_check result. When the composed module fell back to PyTorch's ops,
// `final_run` is the check of the fallback module (--no-compile), `first_run` the check that rejected it:
// eager and composed then come from final_run, the torch.compile baselines from first_run.
nlohmann::json e2e_summary(const nlohmann::json& first_run, const nlohmann::json& final_run,
                           const std::string& fallback_reason);

// One row per plan entry: rule, anchor, accepted, why, fact_ms, pytorch_ms, numerics, rel_err, op.
// Op nodes among `nodes` that run work (views left out): a pattern's share of the report's "graph_ops".
int work_ops(const ir::Graph& graph, const std::vector<std::string>& nodes);
nlohmann::json pattern_rows(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts);

// report.md's one line of report.json's "process" block (Python and `fact` starts, kernel compiles, seconds).
std::string process_line(const nlohmann::json& process);

// report.md from report.json (steps, e2e, patterns, chart).
std::string optimize_report_markdown(const nlohmann::json& report);

}  // namespace fact::compose
