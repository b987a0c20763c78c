#pragma once
// The end-to-end gate of `fact optimize`: from the result of python -m fact.compose.e2e_check, whether the
// composed module stays, loses the ops that were missing when the library loaded, or falls back to
// PyTorch's ops entirely (it failed KernelBench's check, crashed, or ran slower than the original).
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace fact::compose {

struct E2eGate {
  enum class Action { keep, drop_ops, drop_all };
  Action action = Action::keep;
  std::vector<std::string> ops;  // drop_ops: the ops to reject
  std::string reason;            // drop_ops / drop_all: the report line
};

// `result` is the check's JSON (null when it wrote none), `exit_code` its exit status, `accepts_ops`
// whether the composed module calls any FACT op (without one, there is nothing to fall back from).
E2eGate gate_e2e(const nlohmann::json& result, int exit_code, bool accepts_ops);

}  // namespace fact::compose
