#pragma once
// The epilogue activations, read from data/epilogues/activations.json: how CUTLASS (3.x and 2.x), FACT's
// fp32-accurate functors and PyTorch spell each one. A new activation is an entry there, not code here.
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::realize {

struct ActivationEntry {
  std::string name;                // "gelu_tanh"
  std::string cutlass;             // thread-level functor template: "cutlass::epilogue::thread::GELU_taylor"
  std::string cutlass2_output_op;  // 2.x LinearCombination* alias, "" when CUTLASS has none
  std::string fp32_accurate;       // FACT's functor for fp32 and 3xtf32 ("fact_act::GeluTanh"), "" when CUTLASS's is
  nlohmann::json torch;            // {"aten": "gelu", "kwargs": {"approximate": "tanh"}}
  std::string expr;                // one C++ float expression in x and the params: "x > 0.0f ? x : x * negative_slope"
  std::map<std::string, double> params;  // param -> PyTorch's default; a tree node gives every one
};

// Throws Error naming the activation and listing the table's names.
const ActivationEntry& activation_entry(const std::string& name);
std::vector<std::string> activation_names();
// The table's entries for these names, as the data file writes them (for manifests read without FACT).
nlohmann::json activation_table_json(const std::vector<std::string>& names);

}  // namespace fact::realize
