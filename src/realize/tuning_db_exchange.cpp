#include "realize/tuning_db_exchange.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "core/files.h"

namespace fact {
using nlohmann::json;

namespace {

std::optional<double> optional_number(const json& j, const char* key) {
  return j.contains(key) && j[key].is_number() ? std::optional<double>(j[key].get<double>()) : std::nullopt;
}

WorkloadKey key_from_json(const json& k) {
  WorkloadKey key;
  key.pattern = k.at("pattern");
  key.shape = k.at("shape");
  key.dtype = k.at("dtype");
  key.layout = k.at("layout");
  key.numerics = k.at("numerics");
  key.arch = k.at("arch");
  key.cutlass_version = k.at("cutlass_version");
  key.nvcc_version = k.at("nvcc_version");
  return key;
}

CandidateRecord candidate_from_json(const json& c) {
  CandidateRecord r;
  r.config_id = c.at("config_id");
  r.config = c.value("config", json());
  r.status = c.at("status");
  r.time_ms = optional_number(c, "time_ms");
  r.rel_err = optional_number(c, "rel_err");
  r.max_abs_err = optional_number(c, "max_abs_err");
  r.message = c.value("message", "");
  return r;
}

}  // namespace

int export_tuning_db(TuningDb& db, const std::filesystem::path& file) {
  json workloads = json::array();
  for (const auto& w : db.list_workloads())
    if (auto detail = db.show_workload(w.id)) workloads.push_back(to_json(*detail));
  write_file_atomic(file, json{{"format", kTuningExportFormat}, {"version", 1}, {"source", db.path().string()},
                               {"workloads", workloads}}.dump(1) + "\n");
  return static_cast<int>(workloads.size());
}

ImportCounts import_tuning_db(TuningDb& db, const std::filesystem::path& file, bool replace) {
  json doc = read_json_file(file, "tuning database export");
  if (doc.value("format", "") != kTuningExportFormat || !doc.contains("workloads") || !doc["workloads"].is_array())
    throw Error(fmt::format("{} is not a tuning database export (format \"{}\" with \"workloads\"); write one with "
                            "`fact db export`", file.string(), kTuningExportFormat));
  ImportCounts counts;
  int index = 0;
  for (const auto& w : doc["workloads"]) {
    std::string where = fmt::format("{}: workload {}", file.string(), index++);
    WorkloadKey key;
    std::vector<CandidateRecord> candidates;
    BaselineRecord baseline;
    std::string winner;
    try {  // all of the entry is read before anything is written
      key = key_from_json(w.at("key"));
      for (const auto& c : w.value("candidates", json::array())) candidates.push_back(candidate_from_json(c));
      const json b = w.value("baseline", json::object());
      baseline = {b.value("name", ""), optional_number(b, "time_ms"), optional_number(b, "rel_err"),
                  optional_number(b, "max_abs_err")};
      winner = w.value("winner", json()).is_string() ? w["winner"].get<std::string>() : "";
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: malformed ({}); export it again with `fact db export`", where, e.what()));
    }
    bool known = winner.empty() || winner == kBaselineWinner ||
                 std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) { return c.config_id == winner; });
    if (!known) throw Error(fmt::format("{}: its winner '{}' is none of its candidates", where, winner));
    if (!replace && db.get_winner(key)) {
      ++counts.kept;
      continue;
    }
    long long id = db.upsert_workload(key, w.value("device_name", ""));
    db.record_baseline(id, baseline);
    db.record_candidates(id, candidates);
    if (!winner.empty()) db.set_winner(id, winner);
    ++counts.imported;
  }
  return counts;
}

}  // namespace fact
