// `fact optimize MODEL.py`: the whole pipeline in this process (pipeline/optimize_pipeline.h): discover -> tune ->
// ops build -> compose -> end-to-end check against eager and torch.compile, with the gates that keep the module
// correct and never slower, then report.json, report.md and chart.png. Each stage is the same library call its own
// subcommand makes (fact discover, tune, ops build, compose).
#include <iostream>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "core/vocabulary.h"
#include "pipeline/optimize_pipeline.h"

using namespace fact;

namespace {

const bool registered = cli::register_command("optimize", [](CLI::App& app) {
  auto o = std::make_shared<pipeline::OptimizeRequest>();
  auto* cmd = app.add_subcommand("optimize", "All stages: discover, tune, op library, compose, end-to-end check");
  cmd->add_option("model", o->model, "KernelBench-style module file")->required()->check(CLI::ExistingFile);
  cmd->add_option("--arch", o->arch, "target architecture")->check(CLI::IsMember(arch_names()));
  cmd->add_option("--numerics", o->numerics, "numerics mode (default: from the graph's dtype)")
      ->check(CLI::IsMember(numerics_names()));
  cmd->add_option("--conv-numerics", o->conv_numerics,
                  "fp32 convolutions: tf32 (PyTorch's cuDNN default) or 3xtf32 (fp32-accurate, against cuDNN with "
                  "TF32 off)")
      ->check(CLI::IsMember(conv_numerics_names()));
  cmd->add_option("--out", o->out, "output folder (plan, tune report, op library, composed module, report)");
  cmd->add_option("--top", o->top, "kernels built and measured per pattern (a GEMM kernel with its run-time variants)")->check(CLI::Range(1, 64));
  cmd->add_option("--tune-report", o->tune_report, "reuse a report of `fact tune` for this plan instead of tuning")
      ->check(CLI::ExistingFile);
  cmd->add_option("--db", o->db, "tuning database (default $FACT_TUNING_DB or ~/.cache/fact/tuning.sqlite)");
  cmd->add_option("--tune-budget", o->tune_budget_s,
                  "seconds of tuning (winners the database holds spend none); past them, patterns the database has no "
                  "winner for stay PyTorch's (0: none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--no-compile-baselines", o->no_compile, "do not time torch.compile (default and max-autotune)");
  cmd->add_flag("--no-max-autotune", o->no_max_autotune, "do not time torch.compile(mode=\"max-autotune\") (slow to compile)");
  cmd->add_flag("--profile-kernels", o->profile_kernels,
                "also write each timed variant's CUDA kernels, ms a call (torch.profiler), to OUT/profile.json");
  cmd->add_option("--agent", o->agent, "builtin (default, no network) or llm (generates kernels for uncovered fragments)")
      ->check(CLI::IsMember({"builtin", "llm"}));
  cmd->add_option("--endpoint", o->endpoint, "OpenAI-compatible base URL (with --agent llm)");
  cmd->add_option("--model", o->llm_model, "model name at the endpoint (with --agent llm)");
  cmd->add_option("--api-key-env", o->api_key_env, "environment variable holding the API key (never logged)");
  cmd->add_option("--max-rounds", o->max_rounds, "LLM rounds per generated kernel")->check(CLI::Range(1, 64));
  cmd->callback([o] {
    if (o->agent == "llm" && (o->endpoint.empty() || o->llm_model.empty()))
      throw Error("--agent llm needs --endpoint URL and --model NAME (an OpenAI-compatible Chat Completions endpoint)");
    pipeline::optimize_model(*o, std::cout, std::cerr);
  });
});

}  // namespace
