#include "realize/gemm_tuner.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "realize/gemm_codegen.h"
#include "realize/gemm_config_space.h"
#include "realize/nvcc_command.h"
#include "realize/toolchain.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// The Python runner exits 3 when no CUDA GPU is present.
constexpr int kMeasureNoGpu = 3;
// A FACT kernel must beat PyTorch by more than timing noise (a few percent between runs) to be used,
// so the composed module is never slower than the original.
constexpr double kWinMargin = 0.03;

std::string layout_letter(MatrixLayout l) { return l == MatrixLayout::row ? "r" : "c"; }

void say(const GemmTuneOptions& o, const std::string& line) {
  if (o.log) o.log(line);
}

template <class T>
std::optional<T> opt(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

// The runner writes null for absent strings; nlohmann's value() would throw on those.
std::string text(const json& j, const char* key, const std::string& fallback = "") {
  return opt<std::string>(j, key).value_or(fallback);
}

BuildOptions build_options(const GemmTuneOptions& o) {
  BuildOptions b;
  b.compiler_version = nvcc_version_text() + "\ncutlass " + cutlass_version();
  b.workers = o.jobs;
  b.on_progress = o.on_build_progress;
  return b;
}

BuildJob build_job(const GemmConfig& config) {
  GeneratedSource src = generate_gemm_kernel(config);
  BuildJob job;
  job.id = src.config_id;
  job.source = src.text;
  job.command = nvcc_command(config, "{source}", "{output}", cutlass_dir());
  job.timeout = std::chrono::seconds(900);
  return job;
}

json measure_request(const GemmProblem& p, const std::vector<std::pair<std::string, fs::path>>& libraries) {
  json cands = json::array();
  for (auto& [id, lib] : libraries) cands.push_back({{"id", id}, {"library", fs::absolute(lib).string()}});
  auto layout = [](MatrixLayout l) { return l == MatrixLayout::row ? "row" : "col"; };
  return {{"problem",
           {{"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch}, {"layout_a", layout(p.a.layout)},
            {"layout_b", layout(p.b.layout)}, {"dtype", to_string(p.element_in)}, {"numerics", to_string(p.numerics)},
            {"epilogue", to_string(p.epilogue)}}},
          {"candidates", cands},
          {"trials", 3},
          {"baseline", true}};
}

}  // namespace

std::optional<double> GemmTuneOutcome::speedup() const {
  if (!baseline_ms || *baseline_ms <= 0) return std::nullopt;
  if (winner == kBaselineWinner) return 1.0;
  if (!fact_ms || *fact_ms <= 0) return std::nullopt;
  return *baseline_ms / *fact_ms;
}

json GemmTuneOutcome::to_json() const {
  auto o = [](const std::optional<double>& v) { return v ? json(*v) : json(nullptr); };
  return {{"status", status},
          {"message", message},
          {"workload", fact::to_json(key)},
          {"workload_id", workload_id},
          {"winner", winner},
          {"config", winner_config},
          {"library", library.string()},
          {"fact_ms", o(fact_ms)},
          {"baseline", baseline_name},
          {"baseline_ms", o(baseline_ms)},
          {"speedup", o(speedup())},
          {"rel_err", o(rel_err)},
          {"baseline_rel_err", o(baseline_rel_err)},
          {"fp32_reference_err", o(fp32_reference_err)},
          {"candidates", candidates},
          {"built", built},
          {"verified", verified},
          {"seconds", seconds}};
}

WorkloadKey gemm_workload_key(const std::string& pattern, const GemmProblem& p) {
  WorkloadKey k;
  k.pattern = pattern;
  k.shape = p.to_json();
  k.dtype = to_string(p.element_in);
  k.layout = layout_letter(p.a.layout) + layout_letter(p.b.layout) + layout_letter(p.d.layout);
  k.numerics = to_string(p.numerics);
  k.arch = to_string(p.arch);
  k.cutlass_version = cutlass_version();
  k.nvcc_version = nvcc_version();
  return k;
}

GemmTuneOutcome tune_gemm(const std::string& pattern, const GemmProblem& problem, TuningDb& db,
                          const GemmTuneOptions& o) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  GemmTuneOutcome out;
  out.key = gemm_workload_key(pattern, problem);

  // Warm path: a decided winner is one indexed lookup plus a build-cache hit for its library.
  if (!o.force) {
    if (auto w = db.get_winner(out.key)) {
      out.status = "cached";
      out.workload_id = w->workload_id;
      out.winner = w->config_id;
      out.fact_ms = w->time_ms;
      out.baseline_ms = w->baseline_ms;
      if (w->config_id != kBaselineWinner) {
        out.winner_config = w->config;
        auto res = build_kernels({build_job(GemmConfig::from_json(w->config))}, build_options(o));
        if (!res[0].ok()) throw Error("the recorded winner " + w->config_id + " no longer builds: " + res[0].diagnostics);
        out.library = res[0].library;
      }
      out.message = "winner reused from the tuning database " + db.path().string();
      out.seconds = elapsed();
      return out;
    }
  }

  GemmConfigSpace space;
  try {
    GemmSpaceOptions so;
    so.top_n = o.top_n;
    space = enumerate_gemm_configs(problem, so);
  } catch (const Error& e) {
    out.status = "no_candidate";
    out.message = e.what();
    out.seconds = elapsed();
    return out;
  }
  say(o, fmt::format("config space: {} enumerated, {} kept after pruning and ranking", space.enumerated,
                     space.ranked.size()));

  out.workload_id = db.upsert_workload(out.key, "");
  std::map<std::string, CandidateRecord> records;
  std::vector<BuildJob> jobs;
  for (auto& rc : space.ranked) {
    CandidateRecord rec;
    rec.config_id = rc.config.id();
    rec.config = rc.config.to_json();
    try {
      jobs.push_back(build_job(rc.config));
      rec.status = "generated";
    } catch (const Error& e) {
      rec.status = "rejected";
      rec.message = e.what();
    }
    records[rec.config_id] = rec;
  }
  out.candidates = static_cast<int>(records.size());
  say(o, fmt::format("building {} candidates with nvcc", jobs.size()));
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

  // Measure on the GPU through the Python runner (a subprocess, so a crashing kernel stays contained).
  fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / "fact-tune" : o.work_dir;
  fs::create_directories(work);
  std::string stem = fmt::format("measure-{}", out.workload_id);
  fs::path req_path = work / (stem + "-request.json"), res_path = work / (stem + "-result.json");
  write_file_atomic(req_path, measure_request(problem, libraries).dump(1));
  fs::remove(res_path);
  say(o, fmt::format("measuring {} built candidates and the PyTorch baseline on the GPU", libraries.size()));
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
  out.fp32_reference_err = opt<double>(res, "fp32_reference_err");

  std::string best;
  double best_ms = 0;
  for (auto& c : res["candidates"]) {
    auto& rec = records[c.at("id").get<std::string>()];
    rec.status = text(c, "status", "unknown");
    rec.time_ms = opt<double>(c, "ms");
    rec.rel_err = opt<double>(c, "rel_err");
    rec.max_abs_err = opt<double>(c, "max_abs_err");
    rec.message = text(c, "message");
    // 3xTF32 promises fp32 accuracy: no worse than twice cuBLAS fp32's own error against float64.
    if (rec.status == "ok" && problem.numerics == Numerics::x3tf32 && rec.rel_err && out.fp32_reference_err &&
        *rec.rel_err > 2.0 * *out.fp32_reference_err) {
      rec.status = "accuracy_failed";
      rec.message = fmt::format("rel err {:.2e} is over twice cuBLAS fp32's {:.2e}: not fp32-accurate", *rec.rel_err,
                                *out.fp32_reference_err);
    }
    if (rec.status == "ok" && rec.time_ms) {
      ++out.verified;
      if (best.empty() || *rec.time_ms < best_ms) {
        best = rec.config_id;
        best_ms = *rec.time_ms;
      }
    }
  }
  save();

  // A FACT kernel wins only if it verified and beats PyTorch; otherwise PyTorch's op stays.
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
      out.fact_ms = best_ms;  // reported honestly even though it lost
      out.rel_err = records[best].rel_err;
      out.message = fmt::format("best FACT kernel {} took {:.4f} ms, PyTorch {:.4f} ms (a win needs {:.0f}% less): "
                                "PyTorch's op is kept", best, best_ms, base.time_ms.value_or(0), kWinMargin * 100);
    } else {
      out.message = "no candidate verified: PyTorch's op is kept";
    }
  }
  db.set_winner(out.workload_id, out.winner);
  out.seconds = elapsed();
  return out;
}

}  // namespace fact::realize
