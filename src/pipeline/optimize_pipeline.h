#pragma once
// `fact optimize`'s pipeline, every stage a call in this process: discover -> tune -> op library -> compose ->
// end-to-end check against eager and torch.compile, with the gates that keep the module correct and never
// slower, then report.json, report.md and chart.png. A stage that fails is a step marked failed in the report and
// the pipeline goes on with what it has (PyTorch's ops where FACT's could not be used). Without a CUDA GPU it
// does what a CPU can (the plan, and a composed module that keeps PyTorch's ops) and says which steps need one.
#include <filesystem>
#include <ostream>
#include <string>

namespace fact::pipeline {

struct OptimizeRequest {
  std::filesystem::path model;
  std::string arch = "sm90";
  std::string numerics;
  std::string conv_numerics;  // empty: tf32 (PyTorch's cuDNN default); 3xtf32: fp32-accurate convolutions
  std::filesystem::path out = "out/optimize";
  int top = 6;
  std::filesystem::path tune_report;  // reuse this tune report instead of tuning
  std::filesystem::path db;           // tuning database; empty: $FACT_TUNING_DB or ~/.cache/fact/tuning.sqlite
  int tune_budget_s = 0;              // 0: none; else patterns not in the database are not tuned past it
  bool no_compile = false;             // do not time torch.compile
  bool no_max_autotune = false;        // do not time torch.compile(mode="max-autotune")
  bool profile_kernels = false;        // the end-to-end check also writes each variant's CUDA kernels (profile.json)
  // llm: after discovery, the LLM agent generates, verifies and registers kernels for uncovered row-wise fragments
  // and discovery runs again to pick them up. builtin: unchanged pipeline.
  std::string agent = "builtin";
  std::string endpoint, llm_model, api_key_env = "OPENAI_API_KEY";
  int max_rounds = 8;
};

// What the stages print that the user reads goes to `out`, progress to `log` (each stage's full output to its log
// file in the output folder). Throws Error only when discovery fails (nothing else can run).
void optimize_model(const OptimizeRequest& request, std::ostream& out, std::ostream& log);

}  // namespace fact::pipeline
