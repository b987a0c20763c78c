#pragma once
// Stage 1 as one call: trace a module (or load an IR file), match the pattern registry, rank by the cost model,
// print the plan and write it as JSON. `fact discover` and `fact optimize` both call it.
#include <filesystem>
#include <ostream>
#include <string>

#include "discover/plan.h"

namespace fact::discover {

struct DiscoverRequest {
  std::filesystem::path model;      // KernelBench-style module file, or an IR .json
  std::string arch = "sm90";
  std::string numerics;             // empty: from the graph's dtype (fp32 graphs -> 3xtf32)
  std::filesystem::path json_out;   // write the plan here (input of the tune stage); empty: do not
  std::filesystem::path ir_out;     // also keep the traced IR here; empty: a temporary file
  std::filesystem::path rules_dir;  // empty: data/rules and the user registry ($FACT_REGISTRY)
  std::string conv_numerics;        // an fp32-accurate plan's convolutions: empty or tf32 (PyTorch's default), 3xtf32
};

// The plan table goes to `out`, progress lines to `log`. Throws Error naming the input when it cannot be traced
// or matched.
Plan discover_model(const DiscoverRequest& request, std::ostream& out, std::ostream& log);

}  // namespace fact::discover
