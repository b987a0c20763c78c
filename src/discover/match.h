#pragma once
// A match of one registry rule on the graph: the nodes it covers and the values it binds.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::discover {

struct Match {
  std::string rule;                          // rule name, e.g. "gemm_bias_gelu_tanh"
  std::string family;                        // kernel family that realizes it, e.g. "gemm", "attention"
  std::string anchor;                        // graph node whose value the match produces
  std::vector<std::string> nodes;            // covered op nodes, graph order (anchor included)
  // Pattern node id -> graph node, for the rule's extra_outputs that the graph also reads outside the match
  // (e.g. "sum" -> "add_3": a residual sum that feeds both the norm and the next residual add). The fused
  // op writes them beside the anchor's value; an extra output nobody else reads is left out (not written).
  std::map<std::string, std::string> extra_outputs;
  std::map<std::string, std::string> inputs; // pattern variable -> external graph node (e.g. "$x" -> "layer_norm")
  std::map<std::string, nlohmann::json> attrs; // bound literals (e.g. "causal" -> true, "scale" -> 0.102)
  std::map<std::string, int64_t> dims;       // problem dims from the rule (M, N, K, batch, heads, seq, head_dim...)
  std::string dtype;                         // dtype of the anchor's output
  nlohmann::json kernel = nlohmann::json::object();   // the rule's "kernel" block (family, epilogue, ...)
  std::vector<std::string> examples;         // example-index references from the rule
  int priority = 0;                          // the rule's tie-break priority (larger wins)
};

}  // namespace fact::discover
