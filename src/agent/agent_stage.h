#pragma once
// The agent over a discover plan as one call: `builtin` reports the plan and what stays with PyTorch; `llm` asks
// an OpenAI-compatible endpoint for kernels for the fragments no rule covers, verifies them and registers the
// verified ones in the user registry. Writes OUT/agent.json, agent.md and (llm) transcript.jsonl. `fact agent`
// and `fact optimize --agent llm` both call it.
#include <filesystem>
#include <ostream>
#include <string>

#include "agent/agent.h"

namespace fact::agent {

struct AgentRequest {
  std::filesystem::path plan;
  std::string agent = "builtin";  // builtin or llm
  std::string endpoint;           // OpenAI-compatible base URL (llm)
  std::string model;              // model name at the endpoint (llm)
  std::string api_key_env = "OPENAI_API_KEY";
  std::filesystem::path out = "out/agent";
  int max_rounds = 8;
  int request_timeout = 120;      // seconds per LLM request
  int retries = 2;
  int compile_timeout = 300;      // seconds per nvcc run
  int verify_timeout = 300;       // seconds per verification run
};

// The report's lines go to `out`. Throws Error when the agent stops before it finished (the report is written).
AgentReport run_agent(const AgentRequest& request, std::ostream& out);

}  // namespace fact::agent
