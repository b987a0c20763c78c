#pragma once
// The tuning database: what the tuner measured for each workload (every candidate, the PyTorch
// baseline, the winner), so a second `fact tune` of the same workload is a single indexed lookup.
// SQLite with WAL and a busy timeout, so several processes can tune into one file.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

struct sqlite3;

namespace fact {

// What makes two tuning problems the same. canonical() gives the lookup key: trimmed fields, dtype,
// layout and arch lower-cased, shape JSON with sorted keys and integral floats written as integers.
struct WorkloadKey {
  std::string pattern;          // e.g. "gemm_bias_relu"
  nlohmann::json shape;         // e.g. {"m": 4096, "n": 4096, "k": 4096, "batch": 1}
  std::string dtype;            // e.g. "f16"
  std::string layout;           // e.g. "rcr" (A row, B column, D row)
  std::string numerics;         // e.g. "f32_accumulate"
  std::string arch;             // e.g. "sm_90a"
  std::string cutlass_version;  // e.g. "4.2.0"
  std::string nvcc_version;     // e.g. "13.0"
  std::string canonical() const;
};

// One measured candidate. status is free text so the tuner's stages can add their own; the ones
// used are: built, failed, timeout, verify_failed, can_not_implement, ok.
struct CandidateRecord {
  std::string config_id;
  nlohmann::json config;                // the CUTLASS config, as the config space writes it
  std::string status;
  std::optional<double> time_ms;        // only for candidates that ran
  std::optional<double> rel_err;
  std::optional<double> max_abs_err;
  std::string message;                  // diagnostics or the reason it lost
  std::string updated_at;               // set by the database (UTC, ISO 8601)
};

struct BaselineRecord {
  std::string name;                     // e.g. "torch.matmul (cuBLAS)"
  std::optional<double> time_ms;
  std::optional<double> rel_err;
  std::optional<double> max_abs_err;
};

inline constexpr const char* kBaselineWinner = "baseline";  // the winner when PyTorch is fastest

struct WorkloadSummary {
  long long id = 0;                     // short, stable id for `fact db show ID`
  WorkloadKey key;
  std::string device_name;
  int candidates = 0;                   // recorded candidates
  int ok_candidates = 0;                // with status "ok"
  std::string winner;                   // config id, kBaselineWinner, or empty while undecided
  std::optional<double> best_ms;        // the winner's time, else the fastest "ok" candidate's
  std::optional<double> baseline_ms;
  std::string created_at, updated_at;
  std::optional<double> speedup() const;  // baseline_ms / best_ms
};

struct WorkloadDetail {
  WorkloadSummary summary;
  BaselineRecord baseline;
  std::vector<CandidateRecord> candidates;  // "ok" first by time, then the rest by config id
};

// What a warm tune needs: the decided winner of a workload.
struct Winner {
  long long workload_id = 0;
  std::string config_id;                // or kBaselineWinner
  nlohmann::json config;                // null for the baseline
  std::optional<double> time_ms;
  std::optional<double> baseline_ms;
  std::string baseline_name;
  std::optional<double> best_candidate_ms;  // the fastest "ok" candidate's time (what a baseline winner beat)
  std::string device_name;              // the GPU it was measured on ("" when not recorded)
};

nlohmann::json to_json(const WorkloadKey& key);
nlohmann::json to_json(const WorkloadDetail& detail);

// $FACT_TUNING_DB, else ~/.cache/fact/tuning.sqlite.
std::filesystem::path default_tuning_db_path();

class TuningDb {
 public:
  // Opens or creates the database (and its parent folders). Throws Error naming the file when it is
  // not SQLite, is corrupt, belongs to another application, or has a newer schema.
  static TuningDb open(const std::filesystem::path& path);
  ~TuningDb();
  TuningDb(TuningDb&& other) noexcept;
  TuningDb& operator=(TuningDb&& other) noexcept;
  TuningDb(const TuningDb&) = delete;
  TuningDb& operator=(const TuningDb&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Returns the workload's id, creating the record if new; updates device_name and updated_at.
  long long upsert_workload(const WorkloadKey& key, const std::string& device_name);
  std::optional<long long> find_workload(const WorkloadKey& key);

  // Inserts or replaces candidates by config id, all in one transaction.
  void record_candidates(long long workload_id, const std::vector<CandidateRecord>& candidates);
  void record_baseline(long long workload_id, const BaselineRecord& baseline);

  // winner is a recorded candidate's config id or kBaselineWinner; anything else is an Error.
  void set_winner(long long workload_id, const std::string& winner);
  std::optional<Winner> get_winner(const WorkloadKey& key);
  // FACT winners (never the baseline's) of the workloads whose keys equal `key` but for the shape fields at
  // `free_fields` (JSON pointers, e.g. "/m": the same weights at another batch), closest first by the first free
  // field's ratio; `key`'s own workload is left out. A tune seeds its candidates with them.
  std::vector<Winner> neighbour_winners(const WorkloadKey& key, const std::vector<std::string>& free_fields);

  // Removes a workload with its candidates, baseline and winner, so that the next tune measures it again; false when
  // there is no such workload.
  bool forget_workload(long long workload_id);

  std::vector<WorkloadSummary> list_workloads();
  std::optional<WorkloadDetail> show_workload(long long workload_id);

 private:
  TuningDb(std::filesystem::path path, sqlite3* db) : path_(std::move(path)), db_(db) {}
  std::filesystem::path path_;
  sqlite3* db_ = nullptr;
};

}  // namespace fact
