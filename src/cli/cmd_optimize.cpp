// `fact optimize MODEL.py`: the whole pipeline, each stage run as its own `fact` subcommand so every
// step is the same code a user can run alone: discover -> tune -> ops build -> compose -> end-to-end check.
// Without a CUDA GPU it does what a CPU can (the plan, and a composed module that keeps PyTorch's ops)
// and says which steps need a GPU.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"

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
  // --agent llm: after discovery, the LLM agent generates, verifies and registers kernels for uncovered
  // row-wise fragments (fact agent), and discovery runs again to pick them up. builtin: unchanged pipeline.
  std::string agent = "builtin";
  std::string endpoint, llm_model, api_key_env = "OPENAI_API_KEY";
  int max_rounds = 8;
};

// Runs one stage; its output streams to a log in the output folder, its last lines to the user on failure.
bool stage(int index, const std::string& title, const std::vector<std::string>& args, const fs::path& log,
           json& steps, bool print_stdout = false) {
  std::cerr << fmt::format("[{}/5] {}\n", index, title) << std::flush;
  std::vector<std::string> argv = {fs::read_symlink("/proc/self/exe").string()};
  argv.insert(argv.end(), args.begin(), args.end());
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  auto r = run_process(argv, po);
  write_file_atomic(log, r.out + r.err);
  if (print_stdout) std::cout << r.out;
  bool ok = r.exit_code == 0;
  steps.push_back({{"step", title}, {"ok", ok}, {"log", log.string()}});
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

void run_optimize(const OptimizeOptions& o) {
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

  bool gpu = has_cuda_gpu();
  std::string numerics = read_json_file(plan, "plan file").at("numerics");
  json report = {{"format", "fact-optimize-report"}, {"version", 1}, {"model", o.model}, {"arch", o.arch},
                 {"numerics", numerics}, {"gpu", gpu}};
  if (o.agent == "llm" && fs::exists(out / "agent" / "agent.json"))
    report["agent"] = read_json_file(out / "agent" / "agent.json", "agent report");
  if (gpu) {
    stage(2, "tune: build, verify and time CUTLASS candidates", {"tune", plan.string(), "--top", std::to_string(o.top),
          "--report", tune.string(), "--work-dir", (out / "tune-work").string()}, out / "tune.log", steps, true);
    bool have_ops = stage(3, "ops build: the winners as torch.ops.fact in one library",
                          {"ops", "build", tune.string(), "--out", ops.string(), "--compile"}, out / "ops.log", steps);
    std::vector<std::string> compose_args = {"compose", plan.string(), tune.string(), "--model", o.model, "--out",
                                             composed.string()};
    if (have_ops) compose_args.insert(compose_args.end(), {"--op-library", (ops / "libfact_ops.so").string()});
    else write_file_atomic(tune, report_without_winners(plan, "the op library did not build; see ops.log").dump(1));
    stage(4, "compose: ModelNew", compose_args, out / "compose.log", steps, true);
    std::cerr << "[5/5] end-to-end check and timing against eager\n";
    ProcessOptions po;
    po.env["PYTHONPATH"] = python_dir().string();
    std::vector<std::string> check = {python_exe(), "-m", "fact.compose.e2e_check", composed.string(), "-o",
                                      (out / "e2e.json").string(), "--numerics", numerics};
    if (have_ops) check.insert(check.end(), {"--lib", (ops / "libfact_ops.so").string()});
    else check.push_back("--reference");
    auto r = run_process(check, po);
    write_file_atomic(out / "e2e.log", r.out + r.err);
    steps.push_back({{"step", "end-to-end check"}, {"ok", r.exit_code == 0}, {"log", (out / "e2e.log").string()}});
  } else {
    std::string why = "no CUDA GPU on this machine: tuning (verify and time), the op library build and the timed "
                      "end-to-end check need one";
    std::cerr << "[2/5] tune: skipped (" << why << ")\n[3/5] ops build: skipped (needs the GPU machine's torch)\n";
    write_file_atomic(tune, report_without_winners(plan, why).dump(1) + "\n");
    stage(4, "compose: ModelNew with every pattern left to PyTorch (nothing was verified)",
          {"compose", plan.string(), tune.string(), "--model", o.model, "--out", composed.string()}, out / "compose.log",
          steps, true);
    std::cerr << "[5/5] end-to-end check: skipped (needs a GPU to be meaningful)\n";
    report["needs_gpu"] = why;
  }
  report["steps"] = steps;
  write_file_atomic(out / "report.json", report.dump(1) + "\n");
  std::string md = fmt::format("# FACT optimize: {}\n\narch {}, numerics {}, GPU: {}\n\n| step | ok | log |\n|---|---|---|\n",
                               o.model, o.arch, numerics, gpu ? "yes" : "no");
  for (auto& s : steps)
    md += fmt::format("| {} | {} | {} |\n", s["step"].get<std::string>(), s["ok"].get<bool>() ? "yes" : "NO",
                      s["log"].get<std::string>());
  if (!gpu) md += "\n" + report["needs_gpu"].get<std::string>() + ".\n";
  write_file_atomic(out / "report.md", md);
  std::cout << fmt::format("Report: {}/report.md; composed module: {}/model_new.py\n", out.string(), composed.string());
  if (!gpu) std::cout << "Needs a GPU: " << report["needs_gpu"].get<std::string>() << "\n";
}

const bool registered = cli::register_command("optimize", [](CLI::App& app) {
  auto o = std::make_shared<OptimizeOptions>();
  auto* cmd = app.add_subcommand("optimize", "All stages: discover, tune, op library, compose, end-to-end check");
  cmd->add_option("model", o->model, "KernelBench-style module file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--arch", o->arch, "target architecture")->check(CLI::IsMember({"sm80", "sm90"}));
  cmd->add_option("--numerics", o->numerics, "numerics mode (default: from the graph's dtype)")
      ->check(CLI::IsMember({"fp32", "3xtf32", "tf32", "bf16", "fp16"}));
  cmd->add_option("--out", o->out, "output folder (plan, tune report, op library, composed module, report)");
  cmd->add_option("--top", o->top, "candidates tuned per pattern")->check(CLI::Range(1, 64));
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
