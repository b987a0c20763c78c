#pragma once
// Stage 3 as one call: the plan's patterns that won in tuning become torch.ops.fact calls in OUT/model_new.py
// (class ModelNew); the rest stay PyTorch ops, each with the reason in the module and in OUT/manifest.json.
// `fact compose` and `fact optimize` both call it.
#include <filesystem>
#include <ostream>

namespace fact::compose {

struct ComposeRequest {
  std::filesystem::path plan;        // written by the discover stage
  std::filesystem::path report;      // the tune report
  std::filesystem::path model;       // the KernelBench-style file the plan was traced from
  std::filesystem::path out;         // folder to write (model_new.py, user_model.py, manifest.json)
  std::filesystem::path op_library;  // built libfact_ops.so to record in the manifest; empty: none
};

// One line per pattern (FACT op or the reason PyTorch kept it) goes to `out`. Throws Error naming the input.
void compose_model(const ComposeRequest& request, std::ostream& out);

}  // namespace fact::compose
