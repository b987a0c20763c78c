#include "compose/e2e_gate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fact::compose {

using nlohmann::json;

namespace {

// A string field of the check's result, or `fallback` where it is absent or not a string.
std::string text(const json& result, const char* key, const std::string& fallback) {
  return result.contains(key) && result[key].is_string() ? result[key].get<std::string>() : fallback;
}

}  // namespace

E2eGate gate_e2e(const json& result, int exit_code, bool accepts_ops) {
  E2eGate g;
  if (!accepts_ops) return g;  // the module is PyTorch's ops already; the report shows the check's outcome
  auto drop_all = [&](std::string reason) {
    g.action = E2eGate::Action::drop_all;
    g.reason = std::move(reason);
    return g;
  };
  if (!result.is_object() || !result.contains("status"))
    return drop_all(fmt::format("the end-to-end check wrote no result (exit {}); see e2e.log", exit_code));
  std::string status = text(result, "status", "");
  if (status == "ops_missing") {
    g.action = E2eGate::Action::drop_ops;
    if (result.contains("missing_ops") && result["missing_ops"].is_array())
      for (const auto& op : result["missing_ops"])
        if (op.is_string()) g.ops.push_back(op.get<std::string>());
    g.reason = fmt::format("op missing from the op library at load time ({})", text(result, "error", "not found"));
    if (g.ops.empty()) return drop_all(g.reason);
    return g;
  }
  if (!(result.contains("correct") && result["correct"] == true)) {
    std::string detail = text(result, "error", "");
    if (detail.empty() && result.contains("trials"))
      for (const auto& t : result["trials"])
        if (t.is_object() && t.contains("allclose_1e-2") && t["allclose_1e-2"] == false &&
            !(t.contains("correct_by") && t["correct_by"].is_string()))
          detail = t.contains("max_abs_diff") && t["max_abs_diff"].is_number()
                       ? fmt::format("max |composed - original| {:.3g}", t["max_abs_diff"].get<double>())
                       : "the results differ in structure or shape";
    return drop_all(fmt::format("the composed module failed KernelBench's check (atol = rtol = 1e-2) and was further "
                                "from float64 than the original: {}",
                                detail.empty() ? "see e2e.log" : detail));
  }
  const json& c = result.value("composed_ms", json(nullptr));
  const json& e = result.value("eager_ms", json(nullptr));
  if (c.is_number() && e.is_number() && c.get<double>() > e.get<double>())
    return drop_all(fmt::format("the composed module took {:.3f} ms, slower than the original's {:.3f} ms",
                                c.get<double>(), e.get<double>()));
  return g;
}

}  // namespace fact::compose
