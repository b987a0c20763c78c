#pragma once
// The auto-tuner's pipeline, one for GEMMs and every kernel family: ranked candidates -> parallel nvcc
// (content-hash cache) -> the Python runner on the GPU (verify vs float64, time vs PyTorch's ops in the
// same numerics) -> the winning rule (verified, and faster than PyTorch by a margin) -> tuning database.
// A recorded winner is reused without measuring; the winners of the same pattern at neighbouring shapes (another
// batch) are measured first on a cold tune. What differs per kind of kernel is a TuneSubject.
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/process.h"
#include "realize/kernel_builder.h"
#include "realize/tuning_db.h"

namespace fact::realize {

// Runs a measurement request file, writing the result file; the default runs fact.realize.measure in the
// process's Python worker (exit 3: no CUDA GPU). Tests put a stand-in here.
using MeasureRunner = std::function<ProcessResult(const std::filesystem::path& request, const std::filesystem::path& result)>;

struct TuneOptions {
  int top_n = 8;                      // kernels built; each is measured with its run-time variants
  unsigned jobs = 0;                  // parallel compiles; 0: all cores
  bool force = false;                 // ignore a recorded winner and tune again
  bool measure = true;                // false: generate and build only (no GPU needed)
  bool cached_only = false;           // the tuning budget is spent: a recorded winner is used, nothing is tuned
  std::filesystem::path work_dir;     // measurement requests and results go here
  std::function<void(const std::string&)> log;  // one line per step
  BuildProgressFn on_build_progress;
  MeasureRunner measure_runner;       // empty: the Python runner
  // The GPU this run measures on (visible_gpu_name()); a winner recorded on another GPU is tuned again.
  // "" (no GPU here): any recorded winner is reused, e.g. to build a GPU machine's winners on a CPU one.
  std::string device;
};

struct TuneOutcome {
  // tuned: measured now, a FACT kernel won; baseline_kept: measured, PyTorch was faster or no
  // candidate verified; cached: winner read from the database; built: built, not measured (asked);
  // needs_gpu: built, but measuring needs a CUDA GPU; no_candidate: no config can take the problem;
  // over_budget: not in the database and the tuning budget was spent (cached_only).
  std::string status;
  std::string message;
  WorkloadKey key;
  long long workload_id = 0;
  std::string winner;                 // config id, kBaselineWinner, or empty
  nlohmann::json winner_config;       // null unless a FACT kernel won
  std::filesystem::path library;      // the winner's built library
  std::optional<double> fact_ms, baseline_ms, rel_err, baseline_rel_err, fp32_reference_err;
  std::string baseline_name;
  int candidates = 0, built = 0, verified = 0;
  double seconds = 0;
  // Other layouts timed beside the tuned problem (MeasureCase.timed_variants: a conv in a channels-last chain),
  // for the best verified candidate: [{problem, fact_ms, baseline, baseline_ms}]. Reported; they decide nothing.
  nlohmann::json variants = nlohmann::json::array();
  std::optional<double> speedup() const;
  nlohmann::json to_json() const;
};

// One ranked candidate: its build job, or why it could not be generated. Run-time variants of one kernel (a
// GEMM's swizzle, raster order, splits) share a job, so one build serves them; each calls the kernel's symbols
// with its own argument fields.
struct TuneCandidate {
  std::string config_id;
  nlohmann::json config;
  std::optional<BuildJob> job;
  std::string rejected;               // set when job is empty
  std::string kernel_id;              // the library's symbols are fact_<kernel_id>_*; empty: config_id
  nlohmann::json arguments;           // argument-struct fields this candidate sets before each call; null: none
  // The kernel this candidate runs (its build): the one notion the tuner counts, seeds and names symbols by.
  const std::string& kernel() const { return kernel_id.empty() ? config_id : kernel_id; }
};

// A built candidate, as the runner's request names it.
struct BuiltCandidate {
  std::string config_id;
  std::filesystem::path library;
  std::string kernel_id;              // TuneCandidate::kernel(): the symbols' id
  nlohmann::json arguments;
};
using BuiltLibraries = std::vector<BuiltCandidate>;

// What one kind of kernel brings to the pipeline.
struct TuneSubject {
  WorkloadKey key;
  // Ranked candidates (at most top_n), with a line describing the config space for the log. Throws Error
  // when no config can take the problem (the outcome is then no_candidate with that message).
  std::function<std::vector<TuneCandidate>(int top_n, std::string& space_line)> candidates;
  // The candidate of a recorded config, with its build job (a warm tune rebuilds it from the cache); throws Error
  // when the config can no longer be generated.
  std::function<TuneCandidate(const nlohmann::json& config)> rebuild;
  // The runner's request for the built candidates.
  std::function<nlohmann::json(const BuiltLibraries&)> measure_request;
  // The shape fields (JSON pointers) a recorded winner of the same pattern may differ in and still seed this tune
  // (a GEMM's m, a convolution's batch): such winners are measured first, in place of the ranking's last picks.
  // Empty: no seeds.
  std::vector<std::string> free_shape_fields;
  // Optional: given a candidate the runner verified ("ok") and the outcome so far (baseline and
  // fp32 reference errors filled in), returns why its accuracy falls short of the mode's promise, or "".
  std::function<std::string(const CandidateRecord&, const TuneOutcome&)> accuracy_shortfall;
};

// The tuning database's key of a problem; the toolchain versions (CUTLASS, nvcc) are filled in here.
WorkloadKey make_workload_key(const std::string& pattern, nlohmann::json shape, std::string dtype, std::string layout,
                              std::string numerics, std::string arch);

// At most this many neighbours' winners seed a tune (TuneSubject::free_shape_fields).
constexpr int kMaxNeighbourSeeds = 2;

// A FACT kernel must beat PyTorch by more than timing noise (a few percent between runs) to be used,
// so the composed module is never slower than the original.
constexpr double kWinMargin = 0.03;

TuneOutcome tune_candidates(const TuneSubject& subject, TuningDb& db, const TuneOptions& options);

// The builds tune_candidates would start for this subject: the recorded winner's (none where PyTorch won), else
// its candidates' (the ranking's top_n with neighbours' winners seeded in; none when over budget or when no config
// takes the problem: tune_candidates says why). A plan's patterns are built several at a time, in parallel, ahead of
// their measurement (each tune then a cache hit): one pattern's two or three compiles leave most cores idle.
struct PlannedBuilds {
  std::vector<BuildJob> jobs;
  bool recorded_winner = false;  // the jobs rebuild a winner the database holds (no tuning, no budget spent)
};
PlannedBuilds planned_build_jobs(const TuneSubject& subject, TuningDb& db, const TuneOptions& options);

// Starts the measuring worker of the next measurement now (it imports torch while kernels compile); a no-op where
// the options measure nothing or through a stand-in runner.
void prewarm_measurement(const TuneOptions& options);

}  // namespace fact::realize
