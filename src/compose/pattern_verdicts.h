#pragma once
// Which plan entries the composed module takes from FACT: those whose `fact tune --report` row names
// a winning kernel (so it verified) measured faster than PyTorch's ops. Every other entry keeps
// PyTorch's ops, with the reason the module will print (a row the tuner marked failed, a kernel that
// failed verification, a library that did not build or an op missing at load time: its status and message).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "discover/plan.h"

namespace fact::compose {

struct PatternVerdict {
  size_t entry = 0;          // index into plan.entries
  bool accepted = false;
  std::string op_name;       // the op in torch.ops.fact ("gemm_<config id>", "norm_<id>", ...) when accepted
  std::string family;        // the kernel family that realizes it (data/families)
  std::string reason;        // why PyTorch keeps the pattern, when rejected
  nlohmann::json row;        // the tune report's row, or null when the report has none
};

// One verdict per plan entry, in plan order. Throws Error naming `where` when the report is not a
// tune report or names a (pattern, anchor) that the plan does not hold (a report of another plan).
std::vector<PatternVerdict> pattern_verdicts(const discover::Plan& plan, const nlohmann::json& report,
                                             const std::string& where);

}  // namespace fact::compose
