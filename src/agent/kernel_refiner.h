#pragma once
// Generate -> test -> refine (CuTeGen-style) for one row-wise fragment: one evolving kernel source; each
// round the LLM submits the whole file, FACT compiles it (nvcc) and verifies it (harness), and the next
// prompt carries the trimmed compiler errors, the verification failure, or, once correct, the profile and
// the next optimization stage (correct -> tiling -> pipelining -> epilogue). Bounded rounds; the best
// verified version wins.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/chat_client.h"

namespace fact::agent {

struct RefineOptions {
  int max_rounds = 8;          // LLM calls for this fragment, all stages together
  int max_bad_replies = 3;     // unusable replies in a row before giving up
};

struct RefineOutcome {
  bool verified = false;
  KernelCandidate best;        // the fastest verified version
  Verdict best_verdict;
  int rounds = 0;
  int stages_done = 0;         // stages whose kernel verified
  std::string stop_reason;     // one sentence
  nlohmann::json history = nlohmann::json::array();  // per round: stage, outcome, seconds, message
};

struct FragmentTask {
  std::string name;            // registry name == kernel id
  RowwiseFragment fragment;
  nlohmann::json fragment_json;  // fragment_to_json
};

RefineOutcome refine_kernel(ChatBackend& llm, Tools& tools, const FragmentTask& task, const nlohmann::json& system_message,
                            const RefineOptions& options);

// The row-wise family's struct as kernel_abi.h has it (doc comment, #define, typedef), for prompts.
std::string rowwise_abi_text();
// Shape, bytes, FLOPs, arithmetic intensity and roofline bound of the fragment, for prompts and records.
nlohmann::json workload_summary(Tools& tools, const RowwiseFragment& f);

}  // namespace fact::agent
