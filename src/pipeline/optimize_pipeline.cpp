#include "pipeline/optimize_pipeline.h"

#include <fmt/format.h>

#include <chrono>

#include <nlohmann/json.hpp>

#include "agent/agent_stage.h"
#include "compose/compose_stage.h"
#include "compose/e2e_gate.h"
#include "compose/optimize_report.h"
#include "compose/pattern_verdicts.h"
#include "compose/tune_report_edit.h"
#include "core/error.h"
#include "core/files.h"
#include "core/process_counts.h"
#include "core/python_worker.h"
#include "discover/discover_stage.h"
#include "discover/plan.h"
#include "ir/op_table.h"
#include "pipeline/stage_step.h"
#include "realize/op_library_build.h"
#include "realize/tune_stage.h"

namespace fact::pipeline {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The pipeline's state shared by its steps: the request, the folders and the step list of report.json.
struct Run {
  const OptimizeRequest& o;
  std::ostream& out;
  std::ostream& log;
  fs::path dir, plan, tune, ops, composed;
  json steps = json::array();

  bool stage(int index, const std::string& title, const fs::path& log_file, bool echo, const StageBody& body) {
    return run_stage({index, title, log_file, echo}, body, steps, out, log);
  }
};

// Asked of the Python worker (the CUDA driver and the installed torch's build: no torch import, see fact.environment).
bool has_cuda_gpu() {
  auto r = run_python_module("fact.environment", {"--cuda"}, std::chrono::seconds(120));
  try {
    return r.exit_code == 0 && json::parse(r.out).value("cuda", false);
  } catch (const json::exception&) {
    return false;
  }
}

// A tune report in which no pattern won: the composed module then replays the graph with PyTorch's ops.
json report_without_winners(const fs::path& plan_path, const std::string& reason) {
  json plan = read_json_file(plan_path, "plan file");
  json rows = json::array();
  for (auto& p : plan.at("patterns"))
    rows.push_back({{"pattern", p.at("rule")}, {"anchor", p.at("anchor")}, {"status", "needs_gpu"},
                    {"config", nullptr}, {"winner", ""}, {"message", reason}});
  return {{"format", "fact-tune-report"}, {"version", 1}, {"arch", plan.at("arch")}, {"numerics", plan.at("numerics")},
          {"rows", rows}};
}

// Writes the tune report the composer reads (the tuner's, less the winners the gates rejected) and composes.
// A composer that fails with FACT ops composes again without them; one that had to keep the original forward
// (a graph it cannot write back) rejects the winners in `tune`, so the report says what the module runs.
bool compose_stage(Run& run, json& tune, bool with_ops, const std::string& title) {
  fs::path used = run.dir / "tune.compose.json";
  write_file_atomic(used, tune.dump(1) + "\n");
  compose::ComposeRequest request{run.plan, used, run.o.model, run.composed, {}};
  if (with_ops && compose::has_winners(tune)) request.op_library = run.ops / "libfact_ops.so";
  bool ok = run.stage(4, title, run.dir / "compose.log", true,
                      [&](std::ostream& out, std::ostream&) { compose::compose_model(request, out); });
  if (!ok && compose::has_winners(tune)) {
    tune = compose::reject_winners(tune, {}, "compose_failed", "the composer failed with FACT ops; see compose.log");
    return compose_stage(run, tune, false, title + " (again, PyTorch's ops only)");
  }
  if (!ok) return false;
  json manifest = read_json_file(run.composed / "manifest.json", "composed manifest");
  if (manifest.contains("original_forward") && manifest["original_forward"].is_string() && compose::has_winners(tune))
    tune = compose::reject_winners(tune, {}, "original_forward",
                                   "the composed module runs the original forward: " +
                                       manifest["original_forward"].get<std::string>());
  return true;
}

// One run of fact.compose.e2e_check on the composed folder; returns its JSON (null if none). fp32_convs: the plan's
// convolutions are 3xTF32, so PyTorch's own run with cuDNN's TF32 off, the numerics FACT's are measured against.
json e2e_run(Run& run, const std::string& numerics, bool fp32_convs, bool gpu, bool baselines, int& exit_code,
             const std::string& title) {
  fs::path result = run.dir / "e2e.json";
  std::error_code ec;
  fs::remove(result, ec);
  if (!fs::exists(run.composed / "manifest.json")) {  // the composer failed even with PyTorch's ops only
    run.log << "[5/5] " << title << ": skipped, no composed module\n";
    run.steps.push_back({{"step", title + ": skipped, no composed module"}, {"ok", false},
                         {"log", (run.dir / "compose.log").string()}});
    exit_code = -1;
    return nullptr;
  }
  std::vector<std::string> argv = {run.composed.string(), "-o", result.string(), "--numerics", numerics};
  if (fp32_convs) argv.push_back("--no-cudnn-tf32");
  json manifest = read_json_file(run.composed / "manifest.json", "composed manifest");
  if (manifest.contains("op_library") && manifest["op_library"].is_string())
    argv.insert(argv.end(), {"--lib", (run.composed / manifest["op_library"].get<std::string>()).string()});
  // Without a GPU nothing is timed, so the torch.compile baselines would only cost compile time.
  if (!baselines || !gpu) argv.push_back("--no-compile");
  if (run.o.no_max_autotune) argv.push_back("--no-max-autotune");
  if (run.o.profile_kernels && gpu) argv.insert(argv.end(), {"--profile", (run.dir / "profile.json").string()});
  run.log << "[5/5] " << title << "\n" << std::flush;
  auto start = std::chrono::steady_clock::now();
  // In the Python worker: a composed module that crashes it fails this check only (the gate then falls back),
  // and the fallback's check gets a fresh worker.
  auto r = run_python_module("fact.compose.e2e_check", argv);
  double seconds = seconds_since(start);
  note_step_seconds("e2e check", seconds);
  exit_code = r.exit_code;
  fs::path log = run.dir / "e2e.log";
  std::string previous = fs::exists(log) ? read_text_file(log, "e2e log") : "";
  write_file_atomic(log, previous + "=== " + title + "\n" + r.out + r.err);
  run.steps.push_back({{"step", title}, {"ok", r.exit_code == 0}, {"log", log.string()}, {"seconds", seconds}});
  if (!fs::exists(result)) return nullptr;
  try {
    return read_json_file(result, "e2e result");
  } catch (const Error&) {
    return nullptr;
  }
}

// The chart reads report.json; it says itself when there is nothing timed to draw.
json draw_chart(const fs::path& dir) {
  auto start = std::chrono::steady_clock::now();
  auto chart = run_python_module("fact.compose.report_chart",
                                 {(dir / "report.json").string(), "-o", (dir / "chart.png").string()},
                                 std::chrono::seconds(300));
  note_step_seconds("chart", seconds_since(start));
  std::string note = chart.out.empty() ? chart.err : chart.out;
  while (!note.empty() && (note.back() == '\n' || note.back() == ' ')) note.pop_back();
  return {{"file", chart.exit_code == 0 && fs::exists(dir / "chart.png") ? json("chart.png") : json(nullptr)},
          {"note", note.substr(0, 400)}};
}

}  // namespace

void optimize_model(const OptimizeRequest& o, std::ostream& out, std::ostream& log) {
  auto started = std::chrono::steady_clock::now();
  Run run{o, out, log, o.out, o.out / "plan.json", o.out / "tune.json", o.out / "ops", o.out / "composed"};
  fs::create_directories(run.dir);
  discover::DiscoverRequest discover_request{o.model, o.arch, o.numerics, run.plan, {}, {}, o.conv_numerics};
  auto discover = [&](std::ostream& so, std::ostream& sl) { discover::discover_model(discover_request, so, sl); };
  if (!run.stage(1, "discover: trace, match, rank", run.dir / "discover.log", true, discover))
    throw Error("discovery failed for " + o.model.string() + "; nothing else was run");

  if (o.agent == "llm") {
    agent::AgentRequest agent_request;
    agent_request.plan = run.plan;
    agent_request.agent = "llm";
    agent_request.endpoint = o.endpoint;
    agent_request.model = o.llm_model;
    agent_request.api_key_env = o.api_key_env;
    agent_request.max_rounds = o.max_rounds;
    agent_request.out = run.dir / "agent";
    run.stage(1, "agent: generate, verify and register kernels for uncovered fragments (LLM)", run.dir / "agent.log",
              true, [&](std::ostream& so, std::ostream&) { agent::run_agent(agent_request, so); });
    auto agent_report = run.dir / "agent" / "agent.json";
    if (fs::exists(agent_report) && !read_json_file(agent_report, "agent report")["registered"].empty() &&
        !run.stage(1, "discover again: the plan with the newly registered patterns", run.dir / "discover2.log", true,
                   discover))
      throw Error("discovery with the newly registered patterns failed; see " + (run.dir / "discover2.log").string());
  }

  auto gpu_check_start = std::chrono::steady_clock::now();
  bool gpu = has_cuda_gpu();
  note_step_seconds("cuda check", seconds_since(gpu_check_start));
  const json plan = read_json_file(run.plan, "plan file");
  const std::string numerics = plan.at("numerics");
  const bool fp32_convs =
      convolution_numerics(numerics_from_string(numerics),
                           numerics_from_string(plan.value("conv_numerics", std::string("tf32")))) == Numerics::x3tf32;
  json report = {{"format", "fact-optimize-report"}, {"version", 2}, {"model", o.model.string()}, {"arch", o.arch},
                 {"numerics", numerics}, {"gpu", gpu}};
  if (o.agent == "llm" && fs::exists(run.dir / "agent" / "agent.json"))
    report["agent"] = read_json_file(run.dir / "agent" / "agent.json", "agent report");
  json e2e_first = nullptr, e2e_final = nullptr;
  std::string fallback;
  json tune_json;
  if (!gpu && o.tune_report.empty()) {
    std::string why = "no CUDA GPU on this machine: tuning (verify and time), the op library build and the timed "
                      "end-to-end check need one";
    log << "[2/5] tune: skipped (" << why << ")\n[3/5] ops build: skipped (needs the GPU machine's torch)\n";
    write_file_atomic(run.tune, report_without_winners(run.plan, why).dump(1) + "\n");
    tune_json = read_json_file(run.tune, "tune report");
    compose_stage(run, tune_json, false, "compose: ModelNew with every pattern left to PyTorch (nothing was verified)");
    log << "[5/5] end-to-end check: skipped (needs a GPU to be meaningful)\n";
    report["needs_gpu"] = why;
  } else {
    if (!o.tune_report.empty()) {
      log << "[2/5] tune: reusing " << o.tune_report.string() << "\n";
      write_file_atomic(run.tune, read_text_file(o.tune_report, "tune report"));
      run.steps.push_back({{"step", "tune: reused " + o.tune_report.string()}, {"ok", true}, {"log", o.tune_report.string()}});
    } else {
      realize::TunePlanRequest tune_request;
      tune_request.plan = run.plan;
      tune_request.top = o.top;
      tune_request.db = o.db;
      tune_request.budget = std::chrono::seconds(o.tune_budget_s);
      tune_request.report = run.tune;
      tune_request.work_dir = run.dir / "tune-work";
      run.stage(2, "tune: build, verify and time CUTLASS candidates", run.dir / "tune.log", true,
                [&](std::ostream& so, std::ostream& sl) { realize::tune_plan(tune_request, so, sl); });
    }
    tune_json = fs::exists(run.tune) ? read_json_file(run.tune, "tune report")
                                     : report_without_winners(run.plan, "tuning failed; see tune.log");
    bool have_ops = false;
    if (compose::has_winners(tune_json)) {
      realize::OpLibraryBuildRequest ops_request{{run.tune}, run.ops, true, 0};
      have_ops = run.stage(3, "ops build: the winners as torch.ops.fact in one library", run.dir / "ops.log", false,
                           [&](std::ostream& so, std::ostream& sl) { realize::build_op_library(ops_request, so, sl); });
      if (!have_ops)
        tune_json = compose::reject_winners(tune_json, {}, "ops_build_failed",
                                            "the op library did not build; see ops.log");
    } else {
      log << "[3/5] ops build: skipped (no FACT kernel won in tuning)\n";
    }
    compose_stage(run, tune_json, have_ops, "compose: ModelNew");

    // The end-to-end gate: ops missing at load time are dropped and checked again; a module that fails the
    // check, crashes or runs slower than the original falls back to PyTorch's ops, checked once more.
    int code = 0;
    e2e_first = e2e_run(run, numerics, fp32_convs, gpu, !o.no_compile, code, "end-to-end check and timing");
    auto gate = compose::gate_e2e(e2e_first, code, compose::has_winners(tune_json));
    if (gate.action == compose::E2eGate::Action::drop_ops) {
      log << "  " << gate.reason << ": composing again without them\n";
      tune_json = compose::reject_winners(tune_json, {gate.ops.begin(), gate.ops.end()}, "op_missing", gate.reason);
      compose_stage(run, tune_json, have_ops, "compose: ModelNew without the missing ops");
      e2e_first = e2e_run(run, numerics, fp32_convs, gpu, !o.no_compile, code, "end-to-end check and timing (again)");
      gate = compose::gate_e2e(e2e_first, code, compose::has_winners(tune_json));
    }
    if (gate.action != compose::E2eGate::Action::keep) {
      fallback = gate.reason;
      log << "  " << gate.reason << ": falling back to PyTorch's ops\n";
      tune_json = compose::reject_winners(tune_json, {}, "e2e_fallback", gate.reason);
      compose_stage(run, tune_json, false, "compose: ModelNew with PyTorch's ops (fallback)");
      e2e_final = e2e_run(run, numerics, fp32_convs, gpu, false, code, "end-to-end check of the fallback");
    }
    report["e2e"] = compose::e2e_summary(e2e_first, e2e_final, fallback);
  }
  auto plan_value = discover::plan_from_json(read_json_file(run.plan, "plan file"), run.plan.string(), ir::OpTable::builtin());
  // Why what the plan left out stays PyTorch's (a rule's constraint, a tracer rewrite): one line each.
  if (!plan_value.notes.empty()) report["notes"] = plan_value.notes;
  report["patterns"] = compose::pattern_rows(plan_value, compose::pattern_verdicts(plan_value, tune_json, "tune report"));
  // A module torch.export could not trace has no patterns at all: the report says why, not just an empty table.
  if (!plan_value.graph.replay_blocker.empty()) report["left_to_pytorch"] = discover::left_to_pytorch(plan_value);
  // The denominator of "ops covered": op nodes that run work (views and free reshapes left out).
  std::vector<std::string> all;
  for (const auto& n : plan_value.graph.nodes) all.push_back(n.name);
  report["graph_ops"] = compose::work_ops(plan_value.graph, all);
  report["steps"] = run.steps;
  write_file_atomic(run.dir / "report.json", report.dump(1) + "\n");

  report["chart"] = draw_chart(run.dir);
  note_step_seconds("total", seconds_since(started));
  report["process"] = process_counts().to_json();
  write_file_atomic(run.dir / "report.json", report.dump(1) + "\n");
  write_file_atomic(run.dir / "report.md", compose::optimize_report_markdown(report));
  out << fmt::format("Report: {}/report.md; composed module: {}/model_new.py\n", run.dir.string(), run.composed.string());
  if (!fallback.empty()) out << "Fell back to PyTorch's ops: " << fallback << "\n";
  if (report.contains("needs_gpu")) out << "Needs a GPU: " << report["needs_gpu"].get<std::string>() << "\n";
}

}  // namespace fact::pipeline
