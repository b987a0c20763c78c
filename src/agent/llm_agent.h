#pragma once
// The LLM agent: reuses (and re-verifies) registry patterns the plan matched, asks the LLM which
// uncovered row-wise fragments deserve a kernel, runs generate -> test -> refine for each, and registers
// the ones whose kernel verified. Every reply is schema-checked; a bad one is sent back with the reason.
#include <memory>
#include <string>

#include "agent/agent.h"
#include "agent/chat_client.h"
#include "agent/kernel_refiner.h"

namespace fact::agent {

struct LlmAgentOptions {
  RefineOptions refine;
  int max_plan_replies = 3;        // attempts at a usable propose_patterns reply
  std::string endpoint;            // recorded in registry records
  std::string transcript_name = "transcript.jsonl";
};

std::unique_ptr<Agent> make_llm_agent(ChatBackend& llm, LlmAgentOptions options);

}  // namespace fact::agent
