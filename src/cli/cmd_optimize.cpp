// `fact optimize MODEL.py`: the whole pipeline, each stage run as its own `fact` subcommand so every
// step is the same code a user can run alone: discover -> tune -> ops build -> compose -> end-to-end check
// against eager and torch.compile, with the gates that keep the module correct and never slower, then
// report.json, report.md and chart.png. Without a CUDA GPU it does what a CPU can (the plan, and a
// composed module that keeps PyTorch's ops) and says which steps need a GPU.
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "compose/e2e_gate.h"
#include "compose/optimize_report.h"
#include "compose/pattern_verdicts.h"
#include "compose/tune_report_edit.h"
#include "core/error.h"
#include "core/vocabulary.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "core/process_counts.h"
#include "discover/plan.h"
#include "ir/op_table.h"

namespace fs = std::filesystem;
using namespace fact;
using nlohmann::json;

namespace {

struct OptimizeOptions {
  std::string model;
  std::string arch = "sm90";
  std::string numerics;
  std::string out = "out/optimize";
  int top = 6;
  std::string tune_report;  // reuse this tune report instead of tuning
  bool no_compile = false;
  bool no_max_autotune = false;
  // --agent llm: after discovery, the LLM agent generates, verifies and registers kernels for uncovered
  // row-wise fragments (fact agent), and discovery runs again to pick them up. builtin: unchanged pipeline.
  std::string agent = "builtin";
  std::string endpoint, llm_model, api_key_env = "OPENAI_API_KEY";
  int max_rounds = 8;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The short name of a step in report.json's process.step_seconds: a title up to its colon.
std::string step_key(const std::string& title) { return title.substr(0, title.find(':')); }

// Runs one stage; its output streams to a log in the output folder, its last lines to the user on failure. The
// child's tally of Python starts and compiles joins this process's (report.json's "process" block).
bool stage(int index, const std::string& title, const std::vector<std::string>& args, const fs::path& log,
           json& steps, bool print_stdout = false) {
  std::cerr << fmt::format("[{}/5] {}\n", index, title) << std::flush;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::string> argv = {fs::read_symlink("/proc/self/exe").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  fs::path counts = log.string() + ".counts.json";
  std::error_code ec;
  fs::remove(counts, ec);
  po.env[kProcessCountsEnv] = counts.string();
  auto r = run_process(argv, po);
  if (fs::exists(counts)) {
    try {
      add_process_counts(ProcessCounts::from_json(read_json_file(counts, "stage tally")));
    } catch (const Error&) {  // a tally the child left half-written only loses report detail
    }
    fs::remove(counts, ec);
  }
  write_file_atomic(log, r.out + r.err);
  if (print_stdout) std::cout << r.out;
  bool ok = r.exit_code == 0;
  double seconds = seconds_since(start);
  note_step_seconds(step_key(title), seconds);
  steps.push_back({{"step", title}, {"ok", ok}, {"log", log.string()}, {"seconds", seconds}});
  if (!ok) std::cerr << fmt::format("  failed (exit {}); see {}\n{}\n", r.exit_code, log.string(), r.err.substr(0, 1500));
  return ok;
}

bool has_cuda_gpu() {
  ProcessOptions po;
  po.timeout = std::chrono::seconds(120);
  auto r = run_process({python_exe(), "-c", "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 3)"}, po);
  return r.exit_code == 0;
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
bool compose_stage(const OptimizeOptions& o, const fs::path& out, json& tune, bool with_ops, json& steps,
                   const std::string& title) {
  fs::path plan = out / "plan.json", used = out / "tune.compose.json";
  write_file_atomic(used, tune.dump(1) + "\n");
  std::vector<std::string> args = {"compose", plan.string(), used.string(), "--model", o.model, "--out",
                                   (out / "composed").string()};
  if (with_ops && compose::has_winners(tune))
    args.insert(args.end(), {"--op-library", (out / "ops" / "libfact_ops.so").string()});
  bool ok = stage(4, title, args, out / "compose.log", steps, true);
  if (!ok && compose::has_winners(tune)) {
    tune = compose::reject_winners(tune, {}, "compose_failed", "the composer failed with FACT ops; see compose.log");
    return compose_stage(o, out, tune, false, steps, title + " (again, PyTorch's ops only)");
  }
  if (!ok) return false;
  json manifest = read_json_file(out / "composed" / "manifest.json", "composed manifest");
  if (manifest.contains("original_forward") && manifest["original_forward"].is_string() && compose::has_winners(tune))
    tune = compose::reject_winners(tune, {}, "original_forward",
                                   "the composed module runs the original forward: " +
                                       manifest["original_forward"].get<std::string>());
  return true;
}

// One run of python -m fact.compose.e2e_check on the composed folder; returns its JSON (null if none).
json e2e_run(const OptimizeOptions& o, const fs::path& out, const std::string& numerics, bool gpu, bool baselines,
             int& exit_code, json& steps, const std::string& title) {
  fs::path composed = out / "composed", result = out / "e2e.json";
  std::error_code ec;
  fs::remove(result, ec);
  if (!fs::exists(composed / "manifest.json")) {  // the composer failed even with PyTorch's ops only
    std::cerr << "[5/5] " << title << ": skipped, no composed module\n";
    steps.push_back({{"step", title + ": skipped, no composed module"}, {"ok", false}, {"log", (out / "compose.log").string()}});
    exit_code = -1;
    return nullptr;
  }
  std::vector<std::string> argv = {python_exe(), "-m", "fact.compose.e2e_check", composed.string(), "-o",
                                   result.string(), "--numerics", numerics};
  json manifest = read_json_file(composed / "manifest.json", "composed manifest");
  if (manifest.contains("op_library") && manifest["op_library"].is_string())
    argv.insert(argv.end(), {"--lib", (composed / manifest["op_library"].get<std::string>()).string()});
  // Without a GPU nothing is timed, so the torch.compile baselines would only cost compile time.
  if (!baselines || !gpu) argv.push_back("--no-compile");
  if (o.no_max_autotune) argv.push_back("--no-max-autotune");
  std::cerr << "[5/5] " << title << "\n" << std::flush;
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  auto start = std::chrono::steady_clock::now();
  auto r = run_process(argv, po);
  note_step_seconds("e2e check", seconds_since(start));
  exit_code = r.exit_code;
  fs::path log = out / "e2e.log";
  std::string previous = fs::exists(log) ? read_text_file(log, "e2e log") : "";
  write_file_atomic(log, previous + "=== " + title + "\n" + r.out + r.err);
  steps.push_back({{"step", title}, {"ok", r.exit_code == 0}, {"log", log.string()}});
  if (!fs::exists(result)) return nullptr;
  try {
    return read_json_file(result, "e2e result");
  } catch (const Error&) {
    return nullptr;
  }
}

void run_optimize(const OptimizeOptions& o) {
  auto started = std::chrono::steady_clock::now();
  fs::path out(o.out);
  fs::create_directories(out);
  fs::path plan = out / "plan.json", tune = out / "tune.json", ops = out / "ops", composed = out / "composed";
  json steps = json::array();
  std::vector<std::string> discover_args = {"discover", o.model, "--arch", o.arch, "--json", plan.string()};
  if (!o.numerics.empty()) discover_args.insert(discover_args.end(), {"--numerics", o.numerics});
  if (!stage(1, "discover: trace, match, rank", discover_args, out / "discover.log", steps, true))
    throw Error("discovery failed for " + o.model + "; nothing else was run");

  if (o.agent == "llm") {
    std::vector<std::string> agent_args = {"agent", plan.string(), "--agent", "llm", "--endpoint", o.endpoint, "--model",
                                           o.llm_model, "--api-key-env", o.api_key_env, "--max-rounds",
                                           std::to_string(o.max_rounds), "--out", (out / "agent").string()};
    stage(1, "agent: generate, verify and register kernels for uncovered fragments (LLM)", agent_args,
          out / "agent.log", steps, true);
    auto agent_report = out / "agent" / "agent.json";
    if (fs::exists(agent_report) && !read_json_file(agent_report, "agent report")["registered"].empty() &&
        !stage(1, "discover again: the plan with the newly registered patterns", discover_args, out / "discover2.log",
               steps, true))
      throw Error("discovery with the newly registered patterns failed; see " + (out / "discover2.log").string());
  }

  auto gpu_check_start = std::chrono::steady_clock::now();
  bool gpu = has_cuda_gpu();
  note_step_seconds("cuda check", seconds_since(gpu_check_start));
  std::string numerics = read_json_file(plan, "plan file").at("numerics");
  json report = {{"format", "fact-optimize-report"}, {"version", 2}, {"model", o.model}, {"arch", o.arch},
                 {"numerics", numerics}, {"gpu", gpu}};
  if (o.agent == "llm" && fs::exists(out / "agent" / "agent.json"))
    report["agent"] = read_json_file(out / "agent" / "agent.json", "agent report");
  json e2e_first = nullptr, e2e_final = nullptr;
  std::string fallback;
  json tune_json;
  if (!gpu && o.tune_report.empty()) {
    std::string why = "no CUDA GPU on this machine: tuning (verify and time), the op library build and the timed "
                      "end-to-end check need one";
    std::cerr << "[2/5] tune: skipped (" << why << ")\n[3/5] ops build: skipped (needs the GPU machine's torch)\n";
    write_file_atomic(tune, report_without_winners(plan, why).dump(1) + "\n");
    tune_json = read_json_file(tune, "tune report");
    compose_stage(o, out, tune_json, false, steps,
                  "compose: ModelNew with every pattern left to PyTorch (nothing was verified)");
    std::cerr << "[5/5] end-to-end check: skipped (needs a GPU to be meaningful)\n";
    report["needs_gpu"] = why;
  } else {
    if (!o.tune_report.empty()) {
      std::cerr << "[2/5] tune: reusing " << o.tune_report << "\n";
      write_file_atomic(tune, read_text_file(o.tune_report, "tune report"));
      steps.push_back({{"step", "tune: reused " + o.tune_report}, {"ok", true}, {"log", o.tune_report}});
    } else {
      stage(2, "tune: build, verify and time CUTLASS candidates",
            {"tune", plan.string(), "--top", std::to_string(o.top), "--report", tune.string(), "--work-dir",
             (out / "tune-work").string()},
            out / "tune.log", steps, true);
    }
    tune_json = fs::exists(tune) ? read_json_file(tune, "tune report")
                                  : report_without_winners(plan, "tuning failed; see tune.log");
    bool have_ops = false;
    if (compose::has_winners(tune_json)) {
      have_ops = stage(3, "ops build: the winners as torch.ops.fact in one library",
                       {"ops", "build", tune.string(), "--out", ops.string(), "--compile"}, out / "ops.log", steps);
      if (!have_ops)
        tune_json = compose::reject_winners(tune_json, {}, "ops_build_failed",
                                            "the op library did not build; see ops.log");
    } else {
      std::cerr << "[3/5] ops build: skipped (no FACT kernel won in tuning)\n";
    }
    compose_stage(o, out, tune_json, have_ops, steps, "compose: ModelNew");

    // The end-to-end gate: ops missing at load time are dropped and checked again; a module that fails the
    // check, crashes or runs slower than the original falls back to PyTorch's ops, checked once more.
    int code = 0;
    e2e_first = e2e_run(o, out, numerics, gpu, !o.no_compile, code, steps, "end-to-end check and timing");
    auto gate = compose::gate_e2e(e2e_first, code, compose::has_winners(tune_json));
    if (gate.action == compose::E2eGate::Action::drop_ops) {
      std::cerr << "  " << gate.reason << ": composing again without them\n";
      tune_json = compose::reject_winners(tune_json, {gate.ops.begin(), gate.ops.end()}, "op_missing", gate.reason);
      compose_stage(o, out, tune_json, have_ops, steps, "compose: ModelNew without the missing ops");
      e2e_first = e2e_run(o, out, numerics, gpu, !o.no_compile, code, steps, "end-to-end check and timing (again)");
      gate = compose::gate_e2e(e2e_first, code, compose::has_winners(tune_json));
    }
    if (gate.action != compose::E2eGate::Action::keep) {
      fallback = gate.reason;
      std::cerr << "  " << gate.reason << ": falling back to PyTorch's ops\n";
      tune_json = compose::reject_winners(tune_json, {}, "e2e_fallback", gate.reason);
      compose_stage(o, out, tune_json, false, steps, "compose: ModelNew with PyTorch's ops (fallback)");
      e2e_final = e2e_run(o, out, numerics, gpu, false, code, steps, "end-to-end check of the fallback");
    }
    report["e2e"] = compose::e2e_summary(e2e_first, e2e_final, fallback);
  }
  auto plan_value = discover::plan_from_json(read_json_file(plan, "plan file"), plan.string(), ir::OpTable::builtin());
  report["patterns"] = compose::pattern_rows(plan_value, compose::pattern_verdicts(plan_value, tune_json, "tune report"));
  report["steps"] = steps;
  write_file_atomic(out / "report.json", report.dump(1) + "\n");

  // The chart reads report.json; it says itself when there is nothing timed to draw.
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  auto chart_start = std::chrono::steady_clock::now();
  auto chart = run_process({python_exe(), "-m", "fact.compose.report_chart", (out / "report.json").string(), "-o",
                            (out / "chart.png").string()}, po);
  std::string note = chart.out.empty() ? chart.err : chart.out;
  while (!note.empty() && (note.back() == '\n' || note.back() == ' ')) note.pop_back();
  report["chart"] = {{"file", chart.exit_code == 0 && fs::exists(out / "chart.png") ? json("chart.png") : json(nullptr)},
                     {"note", note.substr(0, 400)}};
  note_step_seconds("chart", seconds_since(chart_start));
  note_step_seconds("total", seconds_since(started));
  report["process"] = process_counts().to_json();
  write_file_atomic(out / "report.json", report.dump(1) + "\n");
  write_file_atomic(out / "report.md", compose::optimize_report_markdown(report));
  std::cout << fmt::format("Report: {}/report.md; composed module: {}/model_new.py\n", out.string(), composed.string());
  if (!fallback.empty()) std::cout << "Fell back to PyTorch's ops: " << fallback << "\n";
  if (report.contains("needs_gpu")) std::cout << "Needs a GPU: " << report["needs_gpu"].get<std::string>() << "\n";
}

const bool registered = cli::register_command("optimize", [](CLI::App& app) {
  auto o = std::make_shared<OptimizeOptions>();
  auto* cmd = app.add_subcommand("optimize", "All stages: discover, tune, op library, compose, end-to-end check");
  cmd->add_option("model", o->model, "KernelBench-style module file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--arch", o->arch, "target architecture")->check(CLI::IsMember(arch_names()));
  cmd->add_option("--numerics", o->numerics, "numerics mode (default: from the graph's dtype)")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--out", o->out, "output folder (plan, tune report, op library, composed module, report)");
  cmd->add_option("--top", o->top, "candidates tuned per pattern")->check(CLI::Range(1, 64));
  cmd->add_option("--tune-report", o->tune_report, "reuse a report of `fact tune` for this plan instead of tuning")
      ->check(CLI::ExistingFile);
  cmd->add_flag("--no-compile-baselines", o->no_compile, "do not time torch.compile (default and max-autotune)");
  cmd->add_flag("--no-max-autotune", o->no_max_autotune, "do not time torch.compile(mode=\"max-autotune\") (slow to compile)");
  cmd->add_option("--agent", o->agent, "builtin (default, no network) or llm (generates kernels for uncovered fragments)")
      ->check(CLI::IsMember({"builtin", "llm"}));
  cmd->add_option("--endpoint", o->endpoint, "OpenAI-compatible base URL (with --agent llm)");
  cmd->add_option("--model", o->llm_model, "model name at the endpoint (with --agent llm)");
  cmd->add_option("--api-key-env", o->api_key_env, "environment variable holding the API key (never logged)");
  cmd->add_option("--max-rounds", o->max_rounds, "LLM rounds per generated kernel")->check(CLI::Range(1, 64));
  cmd->callback([o] {
    if (o->agent == "llm" && (o->endpoint.empty() || o->llm_model.empty()))
      throw Error("--agent llm needs --endpoint URL and --model NAME (an OpenAI-compatible Chat Completions endpoint)");
    run_optimize(*o);
  });
});

}  // namespace
