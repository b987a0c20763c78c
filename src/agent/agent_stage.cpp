#include "agent/agent_stage.h"

#include <fmt/format.h>

#include "agent/chat_client.h"
#include "agent/llm_agent.h"
#include "agent/stage_tools.h"
#include "core/error.h"
#include "core/files.h"
#include "discover/user_registry.h"

namespace fact::agent {
namespace fs = std::filesystem;

AgentReport run_agent(const AgentRequest& o, std::ostream& out) {
  const fs::path& dir = o.out;
  fs::create_directories(dir);
  auto plan = discover::plan_from_json(read_json_file(o.plan, "plan file"), o.plan.string(), ir::OpTable::builtin());
  ArchSpec arch = ArchSpec::of(plan.arch);
  StageToolsOptions so;
  so.work_dir = dir / "work";
  so.compile_timeout = std::chrono::seconds(o.compile_timeout);
  so.verify_timeout = std::chrono::seconds(o.verify_timeout);
  StageTools tools(std::move(plan), std::move(arch), discover::UserRegistry::open_default(), so);
  AgentReport report;
  if (o.agent == "builtin") {
    report = make_builtin_planner()->run(tools);
  } else {
    ChatClientOptions co;
    co.endpoint = o.endpoint;
    co.model = o.model;
    co.api_key_env = o.api_key_env;
    co.timeout = std::chrono::seconds(o.request_timeout);
    co.max_retries = o.retries;
    co.transcript = dir / "transcript.jsonl";
    fs::remove(co.transcript);
    ChatClient client(co);
    LlmAgentOptions lo;
    lo.refine.max_rounds = o.max_rounds;
    lo.endpoint = client.url();
    report = make_llm_agent(client, lo)->run(tools);
  }
  write_file_atomic(dir / "agent.json", report.to_json().dump(1) + "\n");
  write_file_atomic(dir / "agent.md", report.to_markdown());
  for (const auto& l : report.lines) out << "  " << l << "\n";
  out << fmt::format("Agent report: {}; registered {}, reused {}\n", (dir / "agent.md").string(),
                     report.registered.size(), report.reused.size());
  if (!report.ok) throw Error("the agent stopped before it finished; see " + (dir / "agent.md").string());
  return report;
}

}  // namespace fact::agent
