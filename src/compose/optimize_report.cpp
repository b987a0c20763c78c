#include "compose/optimize_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace fact::compose {

using nlohmann::json;

namespace {

constexpr const char* kVariants[] = {"eager", "compile_default", "compile_reduce_overhead", "compile_max_autotune",
                                     "composed"};

json number_or_null(const json& obj, const std::string& key) {
  return obj.is_object() && obj.contains(key) && obj[key].is_number() ? obj[key] : json(nullptr);
}

json ratio(const json& num, const json& den) {
  return num.is_number() && den.is_number() && den.get<double>() > 0 ? json(num.get<double>() / den.get<double>())
                                                                      : json(nullptr);
}

std::string cell(const json& v, const char* spec) {
  return v.is_number() ? fmt::format(fmt::runtime(spec), v.get<double>()) : "-";
}

}  // namespace

json e2e_summary(const json& first_run, const json& final_run, const std::string& fallback_reason) {
  static const json kNoRun = json::object();  // the check wrote no result at all
  const json& run = final_run.is_object() ? final_run : first_run.is_object() ? first_run : kNoRun;
  json e2e = {{"correct", run.value("correct", false)},
              {"status", run.value("status", "failed")},
              {"numerics", run.value("numerics", "")},
              {"float32_matmul_precision", run.value("float32_matmul_precision", "")},
              {"dtype", run.value("dtype", "")},
              {"device", run.value("device", "")},
              {"torch", run.value("torch", "")},
              {"eager_ms", number_or_null(run, "eager_ms")},
              {"composed_ms", number_or_null(run, "composed_ms")},
              {"compile_default_ms", number_or_null(first_run, "compile_default_ms")},
              {"compile_reduce_overhead_ms", number_or_null(first_run, "compile_reduce_overhead_ms")},
              {"compile_max_autotune_ms", number_or_null(first_run, "compile_max_autotune_ms")},
              {"rel_err_composed", number_or_null(run, "rel_err_composed")},
              {"rel_err_original", number_or_null(run, "rel_err_original")}};
  // Per variant: status, error (a failed or skipped baseline is reported, never dropped), compile time.
  json variants = json::object();
  for (const char* v : kVariants) {
    const json& src = (std::string(v) == "eager" || std::string(v) == "composed") ? run : first_run;
    json entry = src.contains("variants") && src["variants"].contains(v) ? src["variants"][v] : json::object();
    json out = {{"status", entry.value("status", "not_run")}, {"ms", number_or_null(entry, "ms")},
                {"rel_err", number_or_null(entry, "rel_err")}, {"first_call_s", number_or_null(entry, "first_call_s")}};
    if (entry.contains("error")) out["error"] = entry["error"];
    variants[v] = out;
  }
  e2e["variants"] = variants;
  e2e["compile_seconds"] = {{"compile_default", variants["compile_default"]["first_call_s"]},
                            {"compile_reduce_overhead", variants["compile_reduce_overhead"]["first_call_s"]},
                            {"compile_max_autotune", variants["compile_max_autotune"]["first_call_s"]}};
  const json& c = e2e["composed_ms"];
  json best_compile = nullptr;
  for (const char* k : {"compile_default_ms", "compile_reduce_overhead_ms", "compile_max_autotune_ms"})
    if (e2e[k].is_number() && (best_compile.is_null() || e2e[k].get<double>() < best_compile.get<double>()))
      best_compile = e2e[k];
  e2e["speedups"] = {{"vs_eager", ratio(e2e["eager_ms"], c)},
                     {"vs_compile_default", ratio(e2e["compile_default_ms"], c)},
                     {"vs_compile_reduce_overhead", ratio(e2e["compile_reduce_overhead_ms"], c)},
                     {"vs_compile_max_autotune", ratio(e2e["compile_max_autotune_ms"], c)},
                     {"vs_best_compile", ratio(best_compile, c)}};
  e2e["fallback"] = {{"applied", !fallback_reason.empty()},
                     {"reason", fallback_reason.empty() ? json(nullptr) : json(fallback_reason)},
                     {"rejected_composed_ms", fallback_reason.empty() ? json(nullptr) : number_or_null(first_run, "composed_ms")}};
  if (run.contains("timing")) e2e["timing"] = run["timing"];
  if (run.contains("replay")) e2e["replay"] = run["replay"];  // op by op or one CUDA graph a call, and why
  return e2e;
}

int work_ops(const ir::Graph& graph, const std::vector<std::string>& nodes) {
  int n = 0;
  for (const auto& name : nodes) {
    const ir::Node* node = graph.find(name);
    n += node && node->kind == ir::NodeKind::Op && node->category != ir::OpCategory::View ? 1 : 0;
  }
  return n;
}

json pattern_rows(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts) {
  json rows = json::array();
  for (const auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    const json& r = v.row;
    json row = {{"rule", m.rule},
                {"anchor", m.anchor},
                {"family", m.family},
                {"ops", work_ops(plan.graph, m.nodes)},
                {"accepted", v.accepted},
                {"op", v.accepted ? json(v.op_name) : json(nullptr)},
                {"fact_ms", number_or_null(r, "fact_ms")},
                {"pytorch_ms", number_or_null(r, "baseline_ms")},
                {"numerics", r.is_object() && r.contains("numerics") ? r["numerics"] : json(plan.numerics)},
                {"rel_err", number_or_null(r, "rel_err")},
                {"status", r.is_object() ? r.value("status", "") : ""}};
    row["why"] = v.accepted ? fmt::format("FACT kernel verified and measured faster: {} ms vs PyTorch {} ms",
                                          cell(row["fact_ms"], "{:.4g}"), cell(row["pytorch_ms"], "{:.4g}"))
                            : v.reason;
    rows.push_back(row);
  }
  return rows;
}

std::string process_line(const json& p) {
  int compiled = 0, most = 0;
  const json compiles = p.value("compiles", json::object());  // a named copy: the loop must not outlive it
  for (const auto& [id, n] : compiles.items()) {
    if (!n.is_number_integer()) continue;
    compiled += n.get<int>();
    most = std::max(most, n.get<int>());
  }
  double total = 0;
  if (p.contains("step_seconds") && p["step_seconds"].is_object()) total = p["step_seconds"].value("total", 0.0);
  return fmt::format("Process: Python started {} time(s), `fact` {} time(s); {} kernel compile(s) of {} kernel(s) "
                     "(at most {} per kernel); {:.1f} s in all.",
                     p.value("python_starts", 0), p.value("fact_starts", 0), compiled, compiles.size(), most, total);
}

std::string optimize_report_markdown(const json& report) {
  std::string md = fmt::format("# FACT optimize: {}\n\narch {}, numerics {}, GPU: {}\n\n", report.value("model", ""),
                               report.value("arch", ""), report.value("numerics", ""),
                               report.value("gpu", false) ? "yes" : "no");
  md += "## Steps\n\n| step | ok | log |\n|---|---|---|\n";
  for (const auto& s : report.value("steps", json::array()))
    md += fmt::format("| {} | {} | {} |\n", s.value("step", ""), s.value("ok", false) ? "yes" : "NO", s.value("log", ""));
  if (report.contains("needs_gpu")) md += "\n" + report["needs_gpu"].get<std::string>() + ".\n";
  if (report.contains("process") && report["process"].is_object()) md += "\n" + process_line(report["process"]) + "\n";

  if (report.contains("e2e") && report["e2e"].is_object()) {
    const json& e = report["e2e"];
    md += fmt::format("\n## End to end ({}, float32 matmul precision \"{}\", dtype {}, {})\n\n", e.value("numerics", ""),
                      e.value("float32_matmul_precision", ""), e.value("dtype", ""), e.value("device", ""));
    md += fmt::format("Correct (KernelBench, atol = rtol = 1e-2): {}. Rel err vs float64: composed {}, original {}.\n",
                      e.value("correct", false) ? "yes" : "NO", cell(e["rel_err_composed"], "{:.3g}"),
                      cell(e["rel_err_original"], "{:.3g}"));
    if (e.contains("timing")) md += e["timing"].get<std::string>() + ".\n";
    if (e.contains("replay") && e["replay"].is_object())
      md += "Replay of the composed module: " + e["replay"].value("why", std::string("not decided")) + ".\n";
    if (e["fallback"].value("applied", false))
      md += fmt::format("\n**Fell back to PyTorch's ops**: {}; the delivered module replays the original graph.\n",
                        e["fallback"]["reason"].get<std::string>());
    md += "\n| variant | status | ms (CUDA-event median) | FACT speedup vs it | rel err vs float64 | first call s (compile) |\n"
          "|---|---|---|---|---|---|\n";
    const json& sp = e["speedups"];
    std::map<std::string, json> speed = {{"eager", sp["vs_eager"]},
                                         {"compile_default", sp["vs_compile_default"]},
                                         {"compile_reduce_overhead", sp["vs_compile_reduce_overhead"]},
                                         {"compile_max_autotune", sp["vs_compile_max_autotune"]},
                                         {"composed", nullptr}};
    for (const char* v : kVariants) {
      const json& x = e["variants"][v];
      std::string status = x.value("status", "");
      if (x.contains("error")) status += ": " + x["error"].get<std::string>().substr(0, 160);
      md += fmt::format("| {} | {} | {} | {} | {} | {} |\n", std::string(v) == "composed" ? "FACT (composed)" : v, status,
                        cell(x["ms"], "{:.3f}"), cell(speed[v], "{:.2f}x"), cell(x["rel_err"], "{:.3g}"),
                        cell(x["first_call_s"], "{:.1f}"));
    }
  }
  if (report.contains("left_to_pytorch"))
    md += "\n**Left to PyTorch**: " + report["left_to_pytorch"].get<std::string>() + "\n";
  if (report.contains("notes") && report["notes"].is_array()) {
    md += "\n**Plan notes**:\n\n";
    for (const auto& n : report["notes"]) md += "- " + (n.is_string() ? n.get<std::string>() : n.dump()) + "\n";
  }
  if (report.contains("patterns")) {
    md += "\n## Patterns\n\n| pattern | anchor | FACT? | FACT ms | PyTorch ms | numerics | rel err | why |\n"
          "|---|---|---|---|---|---|---|---|\n";
    for (const auto& p : report["patterns"])
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", p.value("rule", ""), p.value("anchor", ""),
                        p.value("accepted", false) ? "yes" : "no", cell(p["fact_ms"], "{:.4f}"),
                        cell(p["pytorch_ms"], "{:.4f}"), p["numerics"].is_string() ? p["numerics"].get<std::string>() : "-",
                        cell(p["rel_err"], "{:.3g}"), p.value("why", ""));
  }
  if (report.contains("chart") && report["chart"].is_object()) {
    const json& c = report["chart"];
    md += "\n## Chart\n\n" + (c["file"].is_string() ? fmt::format("![time per variant and per pattern]({})", c["file"].get<std::string>())
                                                      : "No chart: " + c.value("note", std::string("not drawn"))) + "\n";
  }
  return md;
}

}  // namespace fact::compose
