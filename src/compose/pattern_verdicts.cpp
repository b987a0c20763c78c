#include "compose/pattern_verdicts.h"

#include <fmt/format.h>

#include <set>

#include "compose/family_call.h"
#include "compose/tune_report_edit.h"
#include "core/error.h"
#include "realize/families/gemm/gemm_workload.h"
#include "realize/kernel_family.h"

namespace fact::compose {
namespace {

using nlohmann::json;

std::string ms(const json& row, const char* key) {
  return row.contains(key) && row[key].is_number() ? fmt::format("{:.3g} ms", row[key].get<double>()) : "? ms";
}

// A covered node other than the anchor (and the extra outputs the op returns) whose value is read outside
// the match: removing it would break that reader, so the pattern cannot be replaced by one call.
std::string escaping_node(const discover::Match& m, const ir::Graph& g) {
  std::set<std::string> returned{m.anchor};
  for (const auto& [id, node] : m.extra_outputs) returned.insert(node);
  for (const auto& name : m.nodes) {
    if (returned.count(name)) continue;
    for (const auto& user : g.users(name))
      if (std::find(m.nodes.begin(), m.nodes.end(), user) == m.nodes.end()) return name;
  }
  return "";
}

}  // namespace

std::vector<PatternVerdict> pattern_verdicts(const discover::Plan& plan, const json& report, const std::string& where) {
  if (!report.is_object() || report.value("format", "") != "fact-tune-report" || !report.contains("rows") ||
      !report["rows"].is_array())
    throw Error(where + ": not a tune report (expected format \"fact-tune-report\" with \"rows\"); write one with "
                        "`fact tune PLAN.json --report FILE`");
  std::vector<PatternVerdict> verdicts(plan.entries.size());
  for (size_t i = 0; i < plan.entries.size(); ++i) verdicts[i].entry = i;

  size_t r = 0;
  for (const auto& row : report["rows"]) {
    ++r;
    if (!row.is_object() || !row.contains("pattern") || !row.contains("anchor") || !row["pattern"].is_string() ||
        !row["anchor"].is_string())
      throw Error(fmt::format("{}: row {} has no \"pattern\" and \"anchor\" strings", where, r));
    std::string pattern = row["pattern"], anchor = row["anchor"];
    size_t i = 0;
    while (i < plan.entries.size() &&
           !(plan.entries[i].match.rule == pattern && plan.entries[i].match.anchor == anchor))
      ++i;
    if (i == plan.entries.size())
      throw Error(fmt::format("{}: row {} names pattern {} at node '{}', which the plan does not hold; pass the "
                              "tune report written for this plan (`fact tune PLAN.json --report FILE`)",
                              where, r, pattern, anchor));
    verdicts[i].row = row;
  }

  for (auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    const json& row = v.row;
    if (row.is_null()) {
      v.reason = "PyTorch kept: the tune report has no row for this pattern";
      continue;
    }
    std::string status = row.value("status", "");
    bool has_winner = (status == "tuned" || status == "cached") && row.contains("config") &&
                      row["config"].is_object() && row.contains("winner") && row["winner"].is_string();
    if (!has_winner) {
      if (status == "tuned" || status == "cached") {
        const std::string baseline =
            fmt::format("{} {}", row.value("baseline", std::string("PyTorch")), ms(row, "baseline_ms"));
        // A cached PyTorch winner without an ok candidate in the database had none verified.
        v.reason = row.contains("fact_ms") && row["fact_ms"].is_number()
                       ? fmt::format("PyTorch kept: best FACT kernel {} vs {}", ms(row, "fact_ms"), baseline)
                       : fmt::format("PyTorch kept: no FACT kernel verified ({})", baseline);
      } else
        v.reason = fmt::format("PyTorch kept: {}: {}", status.empty() ? "no status" : status, row.value("message", ""));
      continue;
    }
    // The tuner already gates on time; a report edited or written elsewhere gets the same rule here.
    bool timed = row.contains("fact_ms") && row["fact_ms"].is_number() && row.contains("baseline_ms") &&
                 row["baseline_ms"].is_number();
    if (!timed || row["fact_ms"].get<double>() >= row["baseline_ms"].get<double>()) {
      v.reason = timed ? fmt::format("PyTorch kept: FACT kernel {} {} does not beat {} {}", row["winner"].get<std::string>(),
                                     ms(row, "fact_ms"), row.value("baseline", std::string("PyTorch")),
                                     ms(row, "baseline_ms"))
                       : "PyTorch kept: the tune report has no measured FACT and PyTorch times for this pattern";
      continue;
    }
    const realize::KernelFamily* family = realize::kernel_family_for(m);
    if (!family) {
      v.reason = "PyTorch kept: family '" + m.family + "' has no composer yet";
      continue;
    }
    if (auto n = escaping_node(m, plan.graph); !n.empty()) {
      v.reason = "PyTorch kept: covered node '" + n + "' is also read outside the pattern";
      continue;
    }
    if (std::string why = unserved_extra_output(m, *family, row["config"]); !why.empty()) {
      v.reason = "PyTorch kept: " + why;
      continue;
    }
    if (!row.contains("problem")) {
      v.reason = "PyTorch kept: the tune report's row has no \"problem\" (the composer reads the op's scalars from "
                 "it); tune again";
      continue;
    }
    v.accepted = true;
    v.family = family->name();
    json named = row;  // the match says which family, whatever the row says
    named["family"] = v.family;
    v.op_name = winning_op(named);
  }
  return verdicts;
}

}  // namespace fact::compose
