#pragma once
// The agent that drives the stages. It sees them through one narrow interface, Tools (inspect the graph,
// list/match rules, retrieve examples, estimate cost, propose the plan, compile, verify and profile a
// generated kernel, register a pattern); kernel generation is the agent's own job. Two agents implement
// Agent: the built-in planner (deterministic, no network: today's discover logic) and the LLM agent
// (src/agent/llm_agent.h), whose every kernel goes through the same compile/verify tools.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/rowwise_fragment.h"
#include "discover/cost_model.h"
#include "discover/example_index.h"
#include "discover/plan.h"
#include "discover/user_registry.h"

namespace fact::agent {

// The row-wise fragment lives in discover (the generated row-wise pass finds them too); the agent reads it here.
using discover::RowwiseFragment;
using discover::fragment_rule;
using discover::fragment_to_json;
using discover::kRowwiseMaxInputs;
using discover::make_rowwise_fragment;
using discover::rowwise_candidates;

// One version of a generated kernel.
struct KernelCandidate {
  std::string id;                 // C identifier fragment: the kernel exports fact_<id>_run
  std::string source;             // CUDA/CuTe source implementing the FactRowwiseArgs ABI
  nlohmann::json config = nlohmann::json::object();  // what the author says it tuned (block size, ...)
};

struct CompileResult {
  bool ok = false;
  bool timed_out = false;
  std::filesystem::path library;  // the shared library when ok
  std::string diagnostics;        // trimmed compiler output
  double seconds = 0;
};

// The verification harness's verdict on one compiled candidate (python/fact/agent/verify_rowwise.py).
struct Verdict {
  // passed | mismatch (wrong numbers, unwritten or out-of-bounds elements) | crash (launch error, fault,
  // time-out) | abi (missing symbol, bad status) | no_gpu (cannot be verified on this machine)
  std::string status;
  std::string message;            // short, for people and for the LLM's feedback
  nlohmann::json details = nlohmann::json::object();  // errors, tolerance, timings, Nsight Compute summary
  bool passed() const { return status == "passed"; }
};

// The stages' tools. StageTools (below) is the real one; tests swap compile/verify for doubles.
class Tools {
 public:
  virtual ~Tools() = default;
  virtual const discover::Plan& plan() const = 0;                   // propose plan: match + cost + rank
  virtual nlohmann::json inspect_graph() const = 0;                 // op nodes: name, op, shape, dtype, args
  virtual std::vector<std::string> list_rules() const = 0;          // rule names (data/rules + user registry)
  virtual std::vector<discover::ExampleHit> retrieve_examples(const std::string& query, size_t k) const = 0;
  virtual discover::CostEstimate estimate_cost(const RowwiseFragment& f) const = 0;
  virtual const ArchSpec& arch() const = 0;
  virtual CompileResult compile(const KernelCandidate& k) = 0;
  // Numerics against float64 PyTorch on fresh inputs, then timing (and an ncu summary where ncu exists).
  virtual Verdict verify(const KernelCandidate& k, const CompileResult& c, const nlohmann::json& fragment) = 0;
  virtual discover::RegistryEntry registry_entry(const std::string& name) const = 0;  // throws Error if absent
  // Writes a verified pattern to the user registry; returns its folder.
  virtual std::filesystem::path register_pattern(const nlohmann::json& rule, const nlohmann::json& record,
                                                 const std::string& source) = 0;
};

// What an agent did, for agent.json / agent.md and the optimize report.
struct AgentReport {
  std::string agent;                          // "builtin" or "llm:<model>"
  std::vector<std::string> lines;             // one sentence per decision
  std::vector<std::string> registered;        // registry entries added in this run
  std::vector<std::string> reused;            // registry entries the plan matched
  nlohmann::json details = nlohmann::json::object();
  bool ok = true;                             // false: stopped early (the last line says why)
  nlohmann::json to_json() const;
  std::string to_markdown() const;
};

class Agent {
 public:
  virtual ~Agent() = default;
  virtual AgentReport run(Tools& tools) = 0;
};

// Deterministic planner: the plan as discover ranks it; fragments no rule covers stay with PyTorch.
std::unique_ptr<Agent> make_builtin_planner();

}  // namespace fact::agent
