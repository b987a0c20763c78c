// `fact agent PLAN.json`: the agent over a discover plan. `--agent builtin` reports the plan and what stays
// with PyTorch; `--agent llm` asks an OpenAI-compatible endpoint for kernels for the fragments no rule
// covers, verifies them and registers the verified ones in the user registry. Writes agent.json, agent.md
// and (llm) transcript.jsonl to --out.
#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include "agent/agent.h"
#include "agent/chat_client.h"
#include "agent/llm_agent.h"
#include "agent/stage_tools.h"
#include "cli/command.h"
#include "core/error.h"
#include "core/files.h"

namespace fs = std::filesystem;
using namespace fact;

namespace {

struct AgentOptions {
  std::string plan;
  std::string agent = "builtin";
  std::string endpoint;
  std::string model;
  std::string api_key_env = "OPENAI_API_KEY";
  std::string out = "out/agent";
  int max_rounds = 8;
  int request_timeout = 120;
  int retries = 2;
  int compile_timeout = 300;
  int verify_timeout = 300;
};

void run_agent(const AgentOptions& o) {
  fs::path out(o.out);
  fs::create_directories(out);
  auto plan = discover::plan_from_json(read_json_file(o.plan, "plan file"), o.plan, ir::OpTable::builtin());
  ArchSpec arch = ArchSpec::of(plan.arch);
  agent::StageToolsOptions so;
  so.work_dir = out / "work";
  so.compile_timeout = std::chrono::seconds(o.compile_timeout);
  so.verify_timeout = std::chrono::seconds(o.verify_timeout);
  agent::StageTools tools(std::move(plan), std::move(arch), discover::UserRegistry::open_default(), so);
  agent::AgentReport report;
  if (o.agent == "builtin") {
    report = agent::make_builtin_planner()->run(tools);
  } else {
    agent::ChatClientOptions co;
    co.endpoint = o.endpoint;
    co.model = o.model;
    co.api_key_env = o.api_key_env;
    co.timeout = std::chrono::seconds(o.request_timeout);
    co.max_retries = o.retries;
    co.transcript = out / "transcript.jsonl";
    fs::remove(co.transcript);
    agent::ChatClient client(co);
    agent::LlmAgentOptions lo;
    lo.refine.max_rounds = o.max_rounds;
    lo.endpoint = client.url();
    report = agent::make_llm_agent(client, lo)->run(tools);
  }
  write_file_atomic(out / "agent.json", report.to_json().dump(1) + "\n");
  write_file_atomic(out / "agent.md", report.to_markdown());
  for (const auto& l : report.lines) std::cout << "  " << l << "\n";
  std::cout << fmt::format("Agent report: {}; registered {}, reused {}\n", (out / "agent.md").string(),
                           report.registered.size(), report.reused.size());
  if (!report.ok) throw Error("the agent stopped before it finished; see " + (out / "agent.md").string());
}

const bool registered = cli::register_command("agent", [](CLI::App& app) {
  auto o = std::make_shared<AgentOptions>();
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
  cmd->callback([o] { run_agent(*o); });
});

}  // namespace
