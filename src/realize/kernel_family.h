#pragma once
// The seam every kernel family (gemm, normalization, attention, rope, rowwise) plugs into. A family turns a
// rule match into a problem, enumerates and ranks configs, renders kernels and op wrappers from its template
// files, names the problem the Python runner verifies (float64 replay of the matched subgraph) and times
// against PyTorch's ops, and writes the composed module's call of its op. Problems and configs cross the seam
// as JSON, so one tuner, one tuning database, one op library and one composer serve every family; each family
// keeps typed structs inside its own files.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/vocabulary.h"
#include "discover/match.h"
#include "ir/graph.h"
#include "realize/candidate_tuner.h"
#include "realize/template_renderer.h"
#include "realize/tuning_db.h"

namespace fact::realize {

// One rendered candidate: what the builder compiles and the database records.
struct FamilyCandidate {
  std::string config_id;      // names the candidate in the tuning database and the op (gemm_<config_id>)
  nlohmann::json config;      // the config as the family writes it (JSON round-trips through the DB)
  std::string summary;        // one line for logs and reports
  Arch arch = Arch::sm90;     // compile target
  // The .cu text exporting the family's C ABI (kernel_abi.h) as fact_<kernel.config_id>_*: the config's own id,
  // or, for a run-time variant (a GEMM's swizzle or splits), the id of the kernel its variants share.
  GeneratedSource kernel;
  std::string rejected;       // set when the generator refused the config (kernel is then empty): why
  nlohmann::json arguments;   // fields of the family's argument struct the variant sets before each call; null: none
  // The exported symbols' id.
  const std::string& kernel_id() const { return kernel.config_id.empty() ? config_id : kernel.config_id; }
};

// The ranked candidates of a problem and one line describing the config space, for the log.
struct CandidateSet {
  std::vector<FamilyCandidate> ranked;
  std::string space;
};

// Where the composer calls a family op: the expressions of the match's tensors and what was tuned.
struct OpCallSite {
  const discover::Match& match;
  const ir::Graph& graph;
  const nlohmann::json& problem;   // the tuned problem (the report row's): the op was verified with its scalars
  const nlohmann::json& config;
  std::string op;                  // "torch.ops.fact.<op name>"
  std::string out;                 // the anchor's Python variable
  std::string where;               // "pattern <rule> at node '<anchor>'", for errors
  // The Python expression of the graph value bound to a kernel operand of the rule ("x", "bias"), or "None"
  // for an absent optional one; throws Error naming the operand when a required one is unbound.
  std::function<std::string(const char* operand, bool required)> tensor;
  // The bound node itself, or nullptr (for shapes and ranks).
  std::function<const ir::Node*(const char* operand)> node;
  // A scalar of the tuned problem; throws Error asking to tune again when it is missing or mistyped.
  nlohmann::json scalar(const char* key, bool boolean) const;
  // Write the result in channels-last order: only FACT ops that read it so in place read it (the composer's
  // choice, compose/channels_last.h; the family's ChannelsLast::writes).
  bool channels_last = false;
};

// Channels-last order between ops (a chain of convolutions keeps it between its kernels): the rule operands the
// op reads in place when they come channels-last, and whether it writes its result so when the call asks.
struct ChannelsLast {
  std::vector<std::string> reads;
  bool writes = false;
};

// The Python the composer writes for one op call: lines that run first (at most a few), then the expression
// whose results go to the anchor's variable (and the extra outputs', see op_returns).
struct OpCall {
  std::string prelude;
  std::string expression;
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  // The family's name, as in the rules, data/families/<name>.json and the runner's request.family.
  virtual std::string name() const = 0;
  // The problem of a match in a numerics mode. Throws Error naming the match and the reason when the
  // family cannot take it (then PyTorch keeps the pattern and the report says why).
  virtual nlohmann::json problem_from_match(const discover::Match& match, const ir::Graph& graph,
                                            Numerics numerics, Arch arch) const = 0;
  // The tuning database's key for a problem.
  virtual WorkloadKey workload_key(const std::string& pattern, const nlohmann::json& problem) const = 0;
  // Ranked, rendered candidates (at most top_n). Throws Error naming the commonest pruning reason when
  // no config can take the problem, or when the family's kernel template is missing.
  virtual CandidateSet candidates(const nlohmann::json& problem, int top_n) const = 0;
  // A recorded config rendered again (a warm tune rebuilds the winner; the op library writes it).
  virtual FamilyCandidate candidate_from_config(const nlohmann::json& config) const = 0;
  // request.problem for `python -m fact.realize.measure` (the family's own fields; see the Python case).
  virtual nlohmann::json measure_problem(const nlohmann::json& problem) const = 0;
  // Why a candidate the runner verified falls short of the numerics mode's promise, given the outcome so far
  // (baseline and fp32 reference errors filled in), or "".
  virtual std::string accuracy_shortfall(const nlohmann::json& problem, const CandidateRecord& candidate,
                                         const TuneOutcome& so_far) const;
  // The op in torch.ops.fact for a config id (a family's config ids already name it: norm_..., attn_...).
  virtual std::string op_name(const std::string& config_id) const { return config_id; }
  // The PyTorch custom op for a config: C++ with CUDA and Meta implementations (ops.cpp's part for it).
  virtual std::string op_wrapper(const nlohmann::json& config) const = 0;
  // The op's schema, e.g. "norm_<id>(Tensor x, Tensor? residual, ...) -> Tensor[]".
  virtual std::string op_schema(const nlohmann::json& config) const = 0;
  // The family's own fields of the op's manifest entry (what op_check reads besides the common ones).
  virtual nlohmann::json manifest_fields(const nlohmann::json& config) const = 0;
  // The composer's call of the op at the match's anchor.
  virtual OpCall op_call(const OpCallSite& site) const = 0;
  // What the op does with channels-last tensors (none by default: the composer hands it PyTorch's order).
  virtual ChannelsLast channels_last(const nlohmann::json& /*problem*/, const nlohmann::json& /*config*/) const {
    return {};
  }
  // The problem as a chain of the family's ops hands it over channels-last (discover::fed_by_own_family), tuned so
  // because the composer will: the problem itself where the family has no channels-last path.
  virtual nlohmann::json in_channels_last_chain(const nlohmann::json& problem) const { return problem; }
  // The values the op returns, in order: "anchor" first, then the kernel outputs the config also writes.
  virtual std::vector<std::string> op_returns(const nlohmann::json& /*config*/) const { return {"anchor"}; }
};

// Adds a family to the registry; each family's file calls it once at static initialization
// (`const bool registered = register_kernel_family(std::make_unique<MyFamily>());`).
bool register_kernel_family(std::unique_ptr<KernelFamily> family);
// Every family by name (one data/families/<name>.json each: a family without its file, or a file without
// its family, is an Error naming it).
std::vector<const KernelFamily*> kernel_families();
// The family that realizes a match (its kernel block's "family", else the rule's), or nullptr.
const KernelFamily* kernel_family_for(const discover::Match& match);
// A family by name; nullptr when unknown.
const KernelFamily* kernel_family_named(const std::string& name);
// The families' names (for messages and command-line checks).
std::vector<std::string> kernel_family_names();

// The family of a tune report row: its "family"; a row without one is a GEMM's (reports written before GEMM
// joined the family seam named no family for GEMM rows).
std::string report_row_family(const nlohmann::json& row);

// data/families/<name>.json: the family's templates and config-space axes (data, not code).
nlohmann::json family_data(const std::string& name);

// The graph node a match bound to the rule variable `var` (a "$name" string), or nullptr when the variable
// is not a string or is unbound (an optional operand the module does not have).
const ir::Node* bound_node(const discover::Match& match, const ir::Graph& graph, const nlohmann::json& var);

// A template path named under `key` ("kernel_template", "op_template") in data/families/<family>.json.
std::string family_template(const std::string& family, const char* key);

// A stable id for a config: prefix + 12 hex digits of FNV-1a over the canonical JSON.
std::string config_hash_id(const std::string& prefix, const nlohmann::json& config);

}  // namespace fact::realize
