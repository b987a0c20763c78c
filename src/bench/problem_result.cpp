#include "bench/problem_result.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace fact::bench {
namespace {

std::optional<double> number(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;  // absent or null: not measured
  return it->get<double>();
}

json optional_json(const std::optional<double>& v) { return v ? json(*v) : json(); }

std::optional<double> ratio(const std::optional<double>& base, const std::optional<double>& ours) {
  if (!base || !ours || *ours <= 0 || *base <= 0) return std::nullopt;
  return *base / *ours;
}

// The worst trial of today's e2e.json, where rel errors live per trial.
std::optional<double> worst_trial(const json& e2e, const char* key) {
  std::optional<double> worst;
  if (auto it = e2e.find("trials"); it != e2e.end() && it->is_array())
    for (const auto& t : *it)
      if (auto v = number(t, key); v && (!worst || *v > *worst)) worst = v;
  return worst;
}

std::string failed_steps(const json& report) {
  std::string text;
  if (auto it = report.find("steps"); it != report.end() && it->is_array())
    for (const auto& s : *it)
      if (!s.value("ok", true))
        text += fmt::format("{}{} failed (see {})", text.empty() ? "" : "; ", s.value("step", std::string("a step")),
                            s.value("log", std::string("its log")));
  return text;
}

}  // namespace

std::string to_string(ProblemStatus s) {
  switch (s) {
    case ProblemStatus::correct: return "correct";
    case ProblemStatus::incorrect: return "incorrect";
    case ProblemStatus::failed: return "failed";
    case ProblemStatus::not_measured: return "not_measured";
    case ProblemStatus::not_run: return "not_run";
  }
  return "not_run";
}

ProblemStatus problem_status_from_string(const std::string& s) {
  for (auto st : {ProblemStatus::correct, ProblemStatus::incorrect, ProblemStatus::failed, ProblemStatus::not_measured,
                  ProblemStatus::not_run})
    if (to_string(st) == s) return st;
  throw Error("unknown problem status '" + s + "' (expected correct, incorrect, failed, not_measured or not_run)");
}

bool ProblemResult::measured() const {
  return status == ProblemStatus::correct || status == ProblemStatus::incorrect || status == ProblemStatus::failed;
}
std::optional<double> ProblemResult::speedup_eager() const { return ratio(eager_ms, composed_ms); }
std::optional<double> ProblemResult::speedup_compile() const { return ratio(compile_default_ms, composed_ms); }
std::optional<double> ProblemResult::speedup_compile_max_autotune() const {
  return ratio(compile_max_autotune_ms, composed_ms);
}

json to_json(const ProblemResult& r) {
  return {{"id", r.id},
          {"level", r.level},
          {"name", r.name},
          {"path", r.path},
          {"status", to_string(r.status)},
          {"reason", r.reason},
          {"numerics", r.numerics},
          {"eager_ms", optional_json(r.eager_ms)},
          {"composed_ms", optional_json(r.composed_ms)},
          {"compile_default_ms", optional_json(r.compile_default_ms)},
          {"compile_reduce_overhead_ms", optional_json(r.compile_reduce_overhead_ms)},
          {"compile_max_autotune_ms", optional_json(r.compile_max_autotune_ms)},
          {"speedup_eager", optional_json(r.speedup_eager())},
          {"speedup_compile", optional_json(r.speedup_compile())},
          {"speedup_compile_max_autotune", optional_json(r.speedup_compile_max_autotune())},
          {"rel_err_composed", optional_json(r.rel_err_composed)},
          {"rel_err_original", optional_json(r.rel_err_original)},
          {"fact_patterns", r.fact_patterns ? json(*r.fact_patterns) : json()},
          {"fact_ops", r.fact_ops ? json(*r.fact_ops) : json()},
          {"graph_ops", r.graph_ops ? json(*r.graph_ops) : json()},
          {"seconds", r.seconds}};
}

ProblemResult problem_result_from_json(const json& j) {
  ProblemResult r;
  r.id = j.at("id").get<std::string>();
  r.level = j.at("level").get<std::string>();
  r.name = j.at("name").get<std::string>();
  r.path = j.value("path", std::string());
  r.status = problem_status_from_string(j.at("status").get<std::string>());
  r.reason = j.value("reason", std::string());
  r.numerics = j.value("numerics", std::string());
  r.eager_ms = number(j, "eager_ms");
  r.composed_ms = number(j, "composed_ms");
  r.compile_default_ms = number(j, "compile_default_ms");
  r.compile_reduce_overhead_ms = number(j, "compile_reduce_overhead_ms");
  r.compile_max_autotune_ms = number(j, "compile_max_autotune_ms");
  r.rel_err_composed = number(j, "rel_err_composed");
  r.rel_err_original = number(j, "rel_err_original");
  if (auto it = j.find("fact_patterns"); it != j.end() && it->is_number_integer()) r.fact_patterns = it->get<int>();
  if (auto it = j.find("fact_ops"); it != j.end() && it->is_number_integer()) r.fact_ops = it->get<int>();
  if (auto it = j.find("graph_ops"); it != j.end() && it->is_number_integer()) r.graph_ops = it->get<int>();
  r.seconds = j.value("seconds", 0.0);
  return r;
}

ProblemResult read_problem_result(const SuiteProblem& problem, const fs::path& out) {
  ProblemResult r;
  r.id = problem.id();
  r.level = problem.level;
  r.name = problem.name;
  r.path = problem.path.string();
  r.status = ProblemStatus::failed;
  fs::path report_path = out / "report.json";
  if (!fs::exists(report_path)) {
    r.reason = "fact optimize wrote no report.json (it stopped early; see optimize.log)";
    return r;
  }
  json report;
  try {
    report = read_json_file(report_path, "optimize report");
  } catch (const Error& e) {
    r.reason = e.what();
    return r;
  }
  r.numerics = report.value("numerics", std::string());
  if (auto it = report.find("needs_gpu"); it != report.end() && !it->is_null()) {
    r.status = ProblemStatus::not_measured;
    r.reason = "not measured: " + (it->is_string() ? it->get<std::string>() : std::string("needs a GPU"));
    return r;
  }

  // The e2e object of report.json (the compose contract), else today's e2e.json beside it.
  json e2e;
  if (auto it = report.find("e2e"); it != report.end() && it->is_object()) {
    e2e = *it;
  } else if (fs::exists(out / "e2e.json")) {
    try {
      e2e = read_json_file(out / "e2e.json", "end-to-end result");
    } catch (const Error& e) {
      r.reason = e.what();
      return r;
    }
  } else {
    std::string steps = failed_steps(report);
    r.reason = "no end-to-end result (report.json has no \"e2e\" and there is no e2e.json)" +
               (steps.empty() ? std::string() : ": " + steps);
    return r;
  }
  if (!e2e.contains("correct") || !e2e["correct"].is_boolean()) {
    r.reason = "the end-to-end result has no boolean \"correct\" field";
    return r;
  }
  if (e2e.contains("numerics") && e2e["numerics"].is_string()) r.numerics = e2e["numerics"].get<std::string>();
  r.eager_ms = number(e2e, "eager_ms");
  r.composed_ms = number(e2e, "composed_ms");
  r.compile_default_ms = number(e2e, "compile_default_ms");
  r.compile_reduce_overhead_ms = number(e2e, "compile_reduce_overhead_ms");
  r.compile_max_autotune_ms = number(e2e, "compile_max_autotune_ms");
  r.rel_err_composed = number(e2e, "rel_err_composed");
  if (!r.rel_err_composed) r.rel_err_composed = worst_trial(e2e, "rel_err_composed");
  r.rel_err_original = number(e2e, "rel_err_original");
  if (!r.rel_err_original) r.rel_err_original = worst_trial(e2e, "rel_err_original");
  // The patterns the composed module runs as FACT ops: report.json's pattern rows marked accepted (after an
  // end-to-end fallback none are).
  if (auto it = report.find("patterns"); it != report.end() && it->is_array()) {
    int accepted = 0, ops = 0;
    for (const auto& row : *it)
      if (row.is_object() && row.value("accepted", false)) {
        ++accepted;
        ops += row.value("ops", 0);
      }
    r.fact_patterns = accepted;
    r.fact_ops = ops;
  }
  if (auto it = report.find("graph_ops"); it != report.end() && it->is_number_integer()) r.graph_ops = it->get<int>();

  if (e2e["correct"].get<bool>()) {
    r.status = ProblemStatus::correct;
    if (auto it = e2e.find("trials"); it != e2e.end() && it->is_array())
      for (const auto& t : *it)
        if (t.is_object() && t.value("correct_by", json(nullptr)) == "float64") {
          r.reason = "beyond atol = rtol = 1e-2 of eager, but as close to float64 as eager (e2e_check's float64 rule)";
          break;
        }
    if (!r.speedup_eager()) r.reason = "correct, but eager or composed time missing: no speedup";
  } else {
    r.status = ProblemStatus::incorrect;
    std::optional<double> max_diff;
    if (auto it = e2e.find("trials"); it != e2e.end() && it->is_array())
      for (const auto& t : *it)
        if (auto v = number(t, "max_abs_diff"); v && (!max_diff || *v > *max_diff)) max_diff = v;
    r.reason = "output differs from eager beyond atol = rtol = 1e-2 and is over twice as far from float64 as eager's";
    if (max_diff) r.reason += fmt::format(" (max abs diff {:.3g})", *max_diff);
    if (r.rel_err_composed && r.rel_err_original)
      r.reason += fmt::format("; rel err vs float64 {:.3g}, eager's {:.3g}", *r.rel_err_composed, *r.rel_err_original);
  }
  return r;
}

}  // namespace fact::bench
