#include "realize/family_tuner.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "realize/nvcc_command.h"
#include "realize/toolchain.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMeasureNoGpu = 3;       // the runner's exit code without a CUDA GPU
constexpr double kWinMargin = 0.03;    // as the GEMM tuner: a win must beat timing noise

template <class T>
std::optional<T> opt(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}
std::string text(const json& j, const char* key, const std::string& fallback = "") {
  return opt<std::string>(j, key).value_or(fallback);
}

BuildOptions build_options(const FamilyTuneOptions& o) {
  BuildOptions b;
  b.compiler_version = nvcc_version_text() + "\ncutlass " + cutlass_version();
  b.workers = o.jobs;
  b.on_progress = o.on_build_progress;
  return b;
}

BuildJob build_job(const FamilyCandidate& c) {
  BuildJob job;
  job.id = c.config_id;
  job.source = c.kernel.text;
  job.command = nvcc_command(c.arch, "{source}", "{output}", cutlass_dir());
  job.timeout = std::chrono::seconds(900);
  return job;
}

}  // namespace

json family_measure_request(const KernelFamily& family, const json& problem,
                            const std::vector<std::pair<std::string, fs::path>>& libraries) {
  json cands = json::array();
  for (auto& [id, lib] : libraries) cands.push_back({{"id", id}, {"library", fs::absolute(lib).string()}});
  return {{"family", family.name()}, {"problem", family.measure_problem(problem)}, {"candidates", cands},
          {"trials", 3}, {"baseline", true}};
}

FamilyTuneOutcome tune_family(const KernelFamily& family, const std::string& pattern, const json& problem,
                              TuningDb& db, const FamilyTuneOptions& o) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto say = [&](const std::string& line) { if (o.log) o.log(line); };
  FamilyTuneOutcome out;
  out.key = family.workload_key(pattern, problem);

  if (!o.force) {
    if (auto w = db.get_winner(out.key)) {
      out.status = "cached";
      out.workload_id = w->workload_id;
      out.winner = w->config_id;
      out.fact_ms = w->time_ms;
      out.baseline_ms = w->baseline_ms;
      if (w->config_id != kBaselineWinner) {
        out.winner_config = w->config;
        auto res = build_kernels({build_job(family.candidate_from_config(w->config))}, build_options(o));
        if (!res[0].ok()) throw Error("the recorded winner " + w->config_id + " no longer builds: " + res[0].diagnostics);
        out.library = res[0].library;
      }
      out.message = "winner reused from the tuning database " + db.path().string();
      out.seconds = elapsed();
      return out;
    }
  }

  std::vector<FamilyCandidate> cands;
  try {
    cands = family.candidates(problem, o.top_n);
  } catch (const Error& e) {
    out.status = "no_candidate";
    out.message = e.what();
    out.seconds = elapsed();
    return out;
  }
  say(fmt::format("{} config space: {} candidates kept after pruning and ranking", family.name(), cands.size()));

  out.workload_id = db.upsert_workload(out.key, "");
  std::map<std::string, CandidateRecord> records;
  std::vector<BuildJob> jobs;
  for (auto& c : cands) {
    CandidateRecord rec;
    rec.config_id = c.config_id;
    rec.config = c.config;
    rec.status = "generated";
    records[rec.config_id] = rec;
    jobs.push_back(build_job(c));
  }
  out.candidates = static_cast<int>(records.size());
  say(fmt::format("building {} candidates with nvcc", jobs.size()));
  auto results = build_kernels(jobs, build_options(o));
  std::vector<std::pair<std::string, fs::path>> libraries;
  for (auto& r : results) {
    auto& rec = records[r.id];
    rec.status = r.ok() ? "built" : to_string(r.status);
    rec.message = r.ok() ? "" : r.diagnostics;
    if (r.ok()) libraries.emplace_back(r.id, r.library);
  }
  out.built = static_cast<int>(libraries.size());
  auto save = [&] {
    std::vector<CandidateRecord> all;
    for (auto& [id, rec] : records) all.push_back(rec);
    db.record_candidates(out.workload_id, all);
  };
  if (!o.measure || libraries.empty()) {
    save();
    out.status = libraries.empty() ? "no_candidate" : "built";
    out.message = libraries.empty() ? "no candidate built; see `fact db show " + std::to_string(out.workload_id) + "`"
                                    : "built only; measuring was not asked for";
    out.seconds = elapsed();
    return out;
  }

  fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / "fact-tune" : o.work_dir;
  fs::create_directories(work);
  std::string stem = fmt::format("measure-{}", out.workload_id);
  fs::path req_path = work / (stem + "-request.json"), res_path = work / (stem + "-result.json");
  write_file_atomic(req_path, family_measure_request(family, problem, libraries).dump(1));
  fs::remove(res_path);
  say(fmt::format("measuring {} built candidates and the PyTorch baseline on the GPU", libraries.size()));
  ProcessOptions po;
  po.env["PYTHONPATH"] = python_dir().string();
  po.timeout = std::chrono::seconds(1800);
  auto pr = run_process({python_exe(), "-m", "fact.realize.measure", req_path.string(), "-o", res_path.string(), "-q"}, po);
  if (pr.exit_code == kMeasureNoGpu) {
    save();
    out.status = "needs_gpu";
    out.message = fmt::format("{} candidates built; measuring and verifying them needs a CUDA GPU", out.built);
    out.seconds = elapsed();
    return out;
  }
  if (pr.exit_code != 0 || !fs::exists(res_path))
    throw Error(fmt::format("the measurement runner failed (exit {}): {}", pr.exit_code, pr.err.substr(0, 2000)));
  json res = read_json_file(res_path, "measurement result");

  BaselineRecord base;
  base.name = text(res["baseline"], "name", "torch");
  base.time_ms = opt<double>(res["baseline"], "ms");
  base.rel_err = opt<double>(res["baseline"], "rel_err");
  base.max_abs_err = opt<double>(res["baseline"], "max_abs_err");
  db.upsert_workload(out.key, text(res, "device"));
  db.record_baseline(out.workload_id, base);
  out.baseline_name = base.name;
  out.baseline_ms = base.time_ms;
  out.baseline_rel_err = base.rel_err;

  std::string best;
  double best_ms = 0;
  for (auto& c : res["candidates"]) {
    auto& rec = records[c.at("id").get<std::string>()];
    rec.status = text(c, "status", "unknown");
    rec.time_ms = opt<double>(c, "ms");
    rec.rel_err = opt<double>(c, "rel_err");
    rec.max_abs_err = opt<double>(c, "max_abs_err");
    rec.message = text(c, "message");
    if (rec.status == "ok" && rec.time_ms) {
      ++out.verified;
      if (best.empty() || *rec.time_ms < best_ms) {
        best = rec.config_id;
        best_ms = *rec.time_ms;
      }
    }
  }
  save();

  if (!best.empty() && (!base.time_ms || best_ms < *base.time_ms * (1.0 - kWinMargin))) {
    out.status = "tuned";
    out.winner = best;
    out.winner_config = records[best].config;
    out.fact_ms = best_ms;
    out.rel_err = records[best].rel_err;
    for (auto& [id, lib] : libraries)
      if (id == best) out.library = lib;
  } else {
    out.status = "baseline_kept";
    out.winner = kBaselineWinner;
    if (!best.empty()) {
      out.fact_ms = best_ms;
      out.rel_err = records[best].rel_err;
      out.message = fmt::format("best FACT kernel {} took {:.4f} ms, {} {:.4f} ms (a win needs {:.0f}% less): "
                                "PyTorch's ops are kept", best, best_ms, base.name, base.time_ms.value_or(0),
                                kWinMargin * 100);
    } else {
      out.message = "no candidate verified: PyTorch's ops are kept";
    }
  }
  db.set_winner(out.workload_id, out.winner);
  out.seconds = elapsed();
  return out;
}

}  // namespace fact::realize
