// `fact agent PLAN.json`: the agent over a discover plan. `--agent builtin` reports the plan and what stays
// with PyTorch; `--agent llm` asks an OpenAI-compatible endpoint for kernels for the fragments no rule
// covers, verifies them and registers the verified ones in the user registry. Writes agent.json, agent.md
// and (llm) transcript.jsonl to --out.
#include <iostream>
#include <memory>

#include "agent/agent_stage.h"
#include "cli/command.h"

using namespace fact;

namespace {

const bool registered = cli::register_command("agent", [](CLI::App& app) {
  auto o = std::make_shared<agent::AgentRequest>();
  auto* cmd = app.add_subcommand("agent", "The agent over a plan: built-in planner, or an LLM that generates, verifies and registers kernels");
  cmd->add_option("plan", o->plan, "plan.json from `fact discover --json`")->required()->check(CLI::ExistingFile);
  cmd->add_option("--agent", o->agent, "builtin (no network) or llm")->check(CLI::IsMember({"builtin", "llm"}));
  cmd->add_option("--endpoint", o->endpoint, "OpenAI-compatible base URL, e.g. https://api.openai.com/v1 (llm)");
  cmd->add_option("--model", o->model, "model name at the endpoint (llm)");
  cmd->add_option("--api-key-env", o->api_key_env, "environment variable holding the API key (never logged)");
  cmd->add_option("--out", o->out, "output folder: agent.json, agent.md, transcript.jsonl, work/");
  cmd->add_option("--max-rounds", o->max_rounds, "LLM rounds per generated kernel")->check(CLI::Range(1, 64));
  cmd->add_option("--request-timeout", o->request_timeout, "seconds per LLM request")->check(CLI::Range(1, 3600));
  cmd->add_option("--retries", o->retries, "extra attempts per LLM request (time-outs, 429, 5xx)")->check(CLI::Range(0, 10));
  cmd->add_option("--compile-timeout", o->compile_timeout, "seconds per nvcc run")->check(CLI::Range(1, 3600));
  cmd->add_option("--verify-timeout", o->verify_timeout, "seconds per verification run")->check(CLI::Range(1, 3600));
  cmd->callback([o] { agent::run_agent(*o, std::cout); });
});

}  // namespace
