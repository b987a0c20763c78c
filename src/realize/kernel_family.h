#pragma once
// The seam for kernel families besides GEMM (normalization, attention, rope). A family turns a rule match into
// a problem, enumerates and ranks configs, renders kernels and op wrappers from its template files, and
// names the problem the Python runner verifies (float64 replay of the matched subgraph) and times against
// PyTorch's ops. Problems and configs cross the seam as JSON, so one tuner, one tuning database and one
// report serve every family; each family keeps typed structs inside its own files.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/match.h"
#include "ir/graph.h"
#include "realize/gemm_codegen.h"
#include "realize/gemm_problem.h"
#include "realize/tuning_db.h"

namespace fact::realize {

// One rendered candidate: what the builder compiles and the database records.
struct FamilyCandidate {
  std::string config_id;      // kernel symbols are fact_<config_id>_*; the op is fact::<config_id>
  nlohmann::json config;      // the config as the family writes it (JSON round-trips through the DB)
  std::string summary;        // one line for logs and reports
  Arch arch = Arch::sm90;     // compile target
  GeneratedSource kernel;     // the .cu text exporting the family's C ABI (kernel_abi.h)
};

class KernelFamily {
 public:
  virtual ~KernelFamily() = default;
  // The rule family it realizes ("normalization", "attention", "rope"); also the runner's request.family.
  virtual std::string name() const = 0;
  // The problem of a match in a numerics mode. Throws Error naming the match and the reason when the
  // family cannot take it (then PyTorch keeps the pattern and the report says why).
  virtual nlohmann::json problem_from_match(const discover::Match& match, const ir::Graph& graph,
                                            Numerics numerics, Arch arch) const = 0;
  // The tuning database's key for a problem.
  virtual WorkloadKey workload_key(const std::string& pattern, const nlohmann::json& problem) const = 0;
  // Ranked, rendered candidates (at most top_n). Throws Error naming the commonest pruning reason when
  // no config can take the problem, or when the family's kernel template is missing.
  virtual std::vector<FamilyCandidate> candidates(const nlohmann::json& problem, int top_n) const = 0;
  // A recorded config rendered again (a warm tune rebuilds the winner; the op library writes it).
  virtual FamilyCandidate candidate_from_config(const nlohmann::json& config) const = 0;
  // request.problem for `python -m fact.realize.measure` (the family's own fields; see the Python case).
  virtual nlohmann::json measure_problem(const nlohmann::json& problem) const = 0;
  // The PyTorch custom op fact::<config id> for a config: C++ with CUDA and Meta implementations.
  virtual GeneratedSource op_wrapper(const nlohmann::json& config) const = 0;
  // The op's schema, e.g. "norm_<id>(Tensor x, Tensor? residual, ...) -> Tensor[]".
  virtual std::string op_schema(const nlohmann::json& config) const = 0;
};

// The family that realizes a match, or nullptr when no realizer exists for it (GEMM-family matches
// have their own tuner and also give nullptr here).
const KernelFamily* kernel_family_for(const discover::Match& match);
// A family by name ("normalization", "attention", "rope"); nullptr when unknown.
const KernelFamily* kernel_family_named(const std::string& name);
std::vector<const KernelFamily*> kernel_families();

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
