#include "compose/tune_report_edit.h"

#include "realize/kernel_family.h"

namespace fact::compose {

using nlohmann::json;

std::string winning_op(const json& row) {
  if (!row.is_object() || !row.contains("config") || !row["config"].is_object() || !row.contains("winner") ||
      !row["winner"].is_string())
    return "";
  const realize::KernelFamily* family = realize::kernel_family_named(realize::report_row_family(row));
  return family ? family->op_name(row["winner"].get<std::string>()) : "";
}

json reject_winners(const json& report, const std::set<std::string>& ops, const std::string& status,
                    const std::string& message) {
  json out = report;
  for (auto& row : out["rows"]) {
    std::string op = winning_op(row);
    if (op.empty() || (!ops.empty() && !ops.count(op))) continue;
    row["rejected_op"] = op;
    row["config"] = nullptr;
    row["winner"] = "torch";
    row["status"] = status;
    row["message"] = message;
  }
  return out;
}

bool has_winners(const json& report) {
  for (const auto& row : report.value("rows", json::array()))
    if (!winning_op(row).empty()) return true;
  return false;
}

}  // namespace fact::compose
