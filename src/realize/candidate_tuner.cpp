#include "realize/candidate_tuner.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include "core/error.h"
#include "core/files.h"
#include "core/python_worker.h"
#include "realize/kernel_build_job.h"
#include "realize/toolchain.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int kMeasureNoGpu = 3;  // the Python runner's exit code without a CUDA GPU

template <class T>
std::optional<T> opt(const json& j, const char* key) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return j.at(key).get<T>();
}

// The runner writes null for absent strings; nlohmann's value() would throw on those.
std::string text(const json& j, const char* key, const std::string& fallback = "") {
  return opt<std::string>(j, key).value_or(fallback);
}

BuildOptions build_options(const TuneOptions& o) { return kernel_build_options(o.jobs, o.on_build_progress); }

// In the process's Python worker; the runner isolates the candidates in children of its own (a kernel may crash).
ProcessResult run_python_measure(const fs::path& request, const fs::path& result) {
  return run_python_module("fact.realize.measure", {request.string(), "-o", result.string(), "-q"},
                           std::chrono::seconds(1800));
}

// Timings do not carry across GPUs (an H100 and an H200 are both sm_90a): such a winner is tuned again.
bool measured_elsewhere(const Winner& w, const TuneOptions& o) {
  return !o.device.empty() && !w.device_name.empty() && w.device_name != o.device;
}

}  // namespace

std::optional<double> TuneOutcome::speedup() const {
  if (!baseline_ms || *baseline_ms <= 0) return std::nullopt;
  if (winner == kBaselineWinner) return 1.0;
  if (!fact_ms || *fact_ms <= 0) return std::nullopt;
  return *baseline_ms / *fact_ms;
}

json TuneOutcome::to_json() const {
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
          {"variants", variants},
          {"built", built},
          {"verified", verified},
          {"seconds", seconds}};
}

WorkloadKey make_workload_key(const std::string& pattern, nlohmann::json shape, std::string dtype, std::string layout,
                              std::string numerics, std::string arch) {
  WorkloadKey k;
  k.pattern = pattern;
  k.shape = std::move(shape);
  k.dtype = std::move(dtype);
  k.layout = std::move(layout);
  k.numerics = std::move(numerics);
  k.arch = std::move(arch);
  k.cutlass_version = cutlass_version();
  k.nvcc_version = nvcc_version();
  return k;
}

namespace {

// The best candidate's times on the timed variants beside the baseline's (the measure result's "variants", paired by
// their order), into out.variants and one line each.
template <class Say>
void report_variants(const json& res, const std::string& best, TuneOutcome& out, Say&& say) {
  const json& base = res["baseline"].value("variants", json::array());
  for (const auto& c : res["candidates"]) {
    if (c.value("id", "") != best || !c.contains("variants")) continue;
    for (size_t i = 0; i < c["variants"].size(); ++i) {
      const json& v = c["variants"][i];
      json b = i < base.size() ? base[i] : json::object();
      json row = {{"problem", v.value("problem", json::object())},
                  {"fact_ms", v.value("ms", json())},
                  {"baseline", b.value("name", json())},
                  {"baseline_ms", b.value("ms", json())}};
      if (row["fact_ms"].is_number() && row["baseline_ms"].is_number()) {
        // (Only convolutions time a variant so far: their other layout, FactConvArgs' channels-last bits.)
        std::string layout = "with channels_last=" + row["problem"].value("channels_last", json(0)).dump();
        std::string baseline = row["baseline"].is_string() ? row["baseline"].get<std::string>() : "PyTorch";
        say(fmt::format("also timed {}: {} {:.4f} ms, {} {:.4f} ms", layout, best, row["fact_ms"].get<double>(),
                        baseline, row["baseline_ms"].get<double>()));
      }
      out.variants.push_back(std::move(row));
    }
  }
}

// The recorded winners of the same pattern at neighbouring shapes go first (their builds are cache hits, their
// configs won a measurement of this kernel's near twin); the ranking's last kernels make room, so top_n holds.
template <class Say>
void seed_with_neighbours(const TuneSubject& subject, TuningDb& db, int top_n, std::vector<TuneCandidate>& ranked,
                          Say&& say) {
  if (subject.free_shape_fields.empty()) return;
  std::vector<TuneCandidate> seeds;
  for (const Winner& w : db.neighbour_winners(subject.key, subject.free_shape_fields)) {
    if (static_cast<int>(seeds.size()) == std::min(kMaxNeighbourSeeds, top_n)) break;
    auto same = [&](const TuneCandidate& c) { return c.config_id == w.config_id; };
    if (std::any_of(seeds.begin(), seeds.end(), same)) continue;
    TuneCandidate c;
    try {
      c = subject.rebuild(w.config);
      c.config_id = w.config_id;
      c.config = w.config;
      if (!c.job) throw Error(c.rejected);
    } catch (const Error& e) {
      say(fmt::format("the winner {} of workload {} cannot seed this tune: {}", w.config_id, w.workload_id, e.what()));
      continue;
    }
    say(fmt::format("seeded with {}, the winner at a neighbouring shape (workload {})", w.config_id, w.workload_id));
    seeds.push_back(std::move(c));
  }
  if (seeds.empty()) return;
  // top_n counts kernels: the ranking's variants of a kept kernel stay (they share its build).
  std::set<std::string> kernels;
  for (const auto& c : seeds) kernels.insert(c.kernel());
  for (auto& c : ranked) {
    auto same = [&](const TuneCandidate& s) { return s.config_id == c.config_id; };
    if (std::any_of(seeds.begin(), seeds.end(), same)) continue;
    if (!kernels.count(c.kernel())) {
      if (static_cast<int>(kernels.size()) >= top_n) continue;
      kernels.insert(c.kernel());
    }
    seeds.push_back(std::move(c));
  }
  ranked = std::move(seeds);
}

// What a cold tune measures: the ranking's top_n, neighbours' winners seeded in. Throws Error as subject.candidates.
template <class Say>
std::vector<TuneCandidate> planned_candidates(const TuneSubject& subject, TuningDb& db, int top_n, Say&& say) {
  std::string space_line;
  auto ranked = subject.candidates(top_n, space_line);
  if (!space_line.empty()) say(space_line);
  seed_with_neighbours(subject, db, top_n, ranked, say);
  return ranked;
}

}  // namespace

PlannedBuilds planned_build_jobs(const TuneSubject& subject, TuningDb& db, const TuneOptions& o) {
  auto w = o.force ? std::nullopt : db.get_winner(subject.key);
  PlannedBuilds planned;
  try {
    if (w && !measured_elsewhere(*w, o)) {
      planned.recorded_winner = true;
      if (w->config_id == kBaselineWinner) return planned;
      if (auto job = subject.rebuild(w->config).job) planned.jobs.push_back(std::move(*job));
      return planned;
    }
    if (o.cached_only) return planned;
    for (auto& c : planned_candidates(subject, db, o.top_n, [](const std::string&) {}))
      if (c.job) planned.jobs.push_back(std::move(*c.job));
  } catch (const Error&) {  // tune_candidates says why when it gets there
  }
  return planned;
}

void prewarm_measurement(const TuneOptions& o) {
  // Only a speed-up: whatever the worker answers, measuring goes on as before.
  if (o.measure && !o.measure_runner) run_python_module("fact.realize.measure", {"--prewarm"}, std::chrono::seconds(60));
}

TuneOutcome tune_candidates(const TuneSubject& subject, TuningDb& db, const TuneOptions& o) {
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  auto say = [&](const std::string& line) {
    if (o.log) o.log(line);
  };
  TuneOutcome out;
  out.key = subject.key;

  // Warm path: a decided winner is one indexed lookup plus a build-cache hit for its library.
  auto w = o.force ? std::nullopt : db.get_winner(out.key);
  if (w && measured_elsewhere(*w, o)) {
    say(fmt::format("the recorded winner was measured on {}, this GPU is {}: tuning again", w->device_name, o.device));
    w.reset();
  }
  if (w) {
    out.status = "cached";
    out.workload_id = w->workload_id;
    out.winner = w->config_id;
    out.baseline_ms = w->baseline_ms;
    out.baseline_name = w->baseline_name;
    // A PyTorch winner reports the fastest FACT kernel it beat (none: no candidate ran), as a fresh tune does.
    out.fact_ms = w->config_id == kBaselineWinner ? w->best_candidate_ms : w->time_ms;
    if (w->config_id != kBaselineWinner) {
      out.winner_config = w->config;
      TuneCandidate recorded = subject.rebuild(w->config);
      if (!recorded.job) throw Error("the recorded winner " + w->config_id + " can no longer be generated: " + recorded.rejected);
      auto res = build_kernels({*recorded.job}, build_options(o));
      if (!res[0].ok()) throw Error("the recorded winner " + w->config_id + " no longer builds: " + res[0].diagnostics);
      out.library = res[0].library;
    }
    out.message = "winner reused from the tuning database " + db.path().string() +
                  (w->device_name.empty() ? "" : " (measured on " + w->device_name + ")");
    out.seconds = elapsed();
    return out;
  }

  if (o.cached_only) {
    out.status = "over_budget";
    out.message = "the tuning budget was spent before this pattern and the tuning database has no winner for it";
    out.seconds = elapsed();
    return out;
  }

  std::vector<TuneCandidate> ranked;
  try {
    ranked = planned_candidates(subject, db, o.top_n, say);
  } catch (const Error& e) {
    out.status = "no_candidate";
    out.message = e.what();
    out.seconds = elapsed();
    return out;
  }

  out.workload_id = db.upsert_workload(out.key, "");
  std::map<std::string, CandidateRecord> records;
  std::map<std::string, const TuneCandidate*> by_id;
  std::vector<BuildJob> jobs;
  for (auto& c : ranked) {
    by_id[c.config_id] = &c;
    CandidateRecord rec;
    rec.config_id = c.config_id;
    rec.config = c.config;
    rec.status = c.job ? "generated" : "rejected";
    rec.message = c.job ? "" : c.rejected;
    if (c.job) jobs.push_back(*c.job);
    records[rec.config_id] = rec;
  }
  out.candidates = static_cast<int>(records.size());
  std::set<std::string> kernels;
  for (const auto& c : ranked)
    if (c.job) kernels.insert(c.kernel());
  say(fmt::format("building {} candidates ({} kernels) with nvcc", jobs.size(), kernels.size()));
  if (!jobs.empty()) prewarm_measurement(o);
  auto results = build_kernels(jobs, build_options(o));
  BuiltLibraries libraries;
  for (auto& r : results) {
    auto& rec = records[r.id];
    rec.status = r.ok() ? "built" : to_string(r.status);
    rec.message = r.ok() ? "" : r.diagnostics;
    const TuneCandidate& c = *by_id.at(r.id);
    if (r.ok()) libraries.push_back({r.id, r.library, c.kernel(), c.arguments});
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

  // Measure on the GPU through the runner (its candidates run in child processes, so a crashing kernel stays contained).
  fs::path work = o.work_dir.empty() ? fs::temp_directory_path() / "fact-tune" : o.work_dir;
  fs::create_directories(work);
  std::string stem = fmt::format("measure-{}", out.workload_id);
  fs::path req_path = work / (stem + "-request.json"), res_path = work / (stem + "-result.json");
  write_file_atomic(req_path, subject.measure_request(libraries).dump(1));
  fs::remove(res_path);
  say(fmt::format("measuring {} built candidates and the PyTorch baseline on the GPU", libraries.size()));
  auto pr = o.measure_runner ? o.measure_runner(req_path, res_path) : run_python_measure(req_path, res_path);
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
  base.name = text(res["baseline"], "name", "PyTorch");
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
    std::string id = c.at("id").get<std::string>();
    if (!records.count(id)) throw Error("the measurement runner answered for '" + id + "', which was not asked for");
    auto& rec = records[id];
    rec.status = text(c, "status", "unknown");
    rec.time_ms = opt<double>(c, "ms");
    rec.rel_err = opt<double>(c, "rel_err");
    rec.max_abs_err = opt<double>(c, "max_abs_err");
    rec.message = text(c, "message");
    if (rec.status == "ok" && subject.accuracy_shortfall) {
      if (std::string why = subject.accuracy_shortfall(rec, out); !why.empty()) {
        rec.status = "accuracy_failed";
        rec.message = why;
      }
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
  if (!best.empty()) report_variants(res, best, out, say);

  // A FACT kernel wins only if it verified and beats PyTorch; otherwise PyTorch's ops stay.
  if (!best.empty() && (!base.time_ms || best_ms < *base.time_ms * (1.0 - kWinMargin))) {
    out.status = "tuned";
    out.winner = best;
    out.winner_config = records[best].config;
    out.fact_ms = best_ms;
    out.rel_err = records[best].rel_err;
    for (auto& b : libraries)
      if (b.config_id == best) out.library = b.library;
  } else {
    out.status = "baseline_kept";
    out.winner = kBaselineWinner;
    if (!best.empty()) {
      out.fact_ms = best_ms;  // reported honestly even though it lost
      out.rel_err = records[best].rel_err;
      out.message = fmt::format("best FACT kernel {} took {:.4f} ms, {} {:.4f} ms (a win needs {:.0f}% less): "
                                "PyTorch's op is kept", best, best_ms, base.name, base.time_ms.value_or(0),
                                kWinMargin * 100);
    } else {
      out.message = "no candidate verified: PyTorch's op is kept";
    }
  }
  db.set_winner(out.workload_id, out.winner);
  out.seconds = elapsed();
  return out;
}

}  // namespace fact::realize
