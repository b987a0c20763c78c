#include "realize/gemm_tuner.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/paths.h"
#include "realize/gemm_codegen.h"
#include "realize/gemm_config_space.h"
#include "realize/nvcc_command.h"

namespace fact::realize {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string layout_letter(MatrixLayout l) { return l == MatrixLayout::row ? "r" : "c"; }

BuildJob build_job(const GemmConfig& config) {
  GeneratedSource src = generate_gemm_kernel(config);
  BuildJob job;
  job.id = src.config_id;
  job.source = src.text;
  job.command = nvcc_command(config, "{source}", "{output}", cutlass_dir());
  job.timeout = std::chrono::seconds(900);
  return job;
}

json measure_request(const GemmProblem& p, const BuiltLibraries& libraries) {
  json cands = json::array();
  for (auto& [id, lib] : libraries) cands.push_back({{"id", id}, {"library", fs::absolute(lib).string()}});
  auto layout = [](MatrixLayout l) { return l == MatrixLayout::row ? "row" : "col"; };
  return {{"family", "gemm"},
          {"problem",
           {{"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch}, {"layout_a", layout(p.a.layout)},
            {"layout_b", layout(p.b.layout)}, {"dtype", to_string(p.element_in)}, {"numerics", to_string(p.numerics)},
            {"epilogue", to_string(p.epilogue)}}},
          {"candidates", cands},
          {"trials", 3},
          {"baseline", true}};
}

}  // namespace

WorkloadKey gemm_workload_key(const std::string& pattern, const GemmProblem& p) {
  return make_workload_key(pattern, p.to_json(), to_string(p.element_in),
                           layout_letter(p.a.layout) + layout_letter(p.b.layout) + layout_letter(p.d.layout),
                           to_string(p.numerics), to_string(p.arch));
}

TuneOutcome tune_gemm(const std::string& pattern, const GemmProblem& problem, TuningDb& db, const TuneOptions& o) {
  TuneSubject s;
  s.key = gemm_workload_key(pattern, problem);
  s.candidates = [&](int top_n, std::string& space_line) {
    GemmSpaceOptions so;
    so.top_n = top_n;
    GemmConfigSpace space = enumerate_gemm_configs(problem, so);
    space_line = fmt::format("config space: {} enumerated, {} kept after pruning and ranking", space.enumerated,
                             space.ranked.size());
    std::vector<TuneCandidate> out;
    for (auto& rc : space.ranked) {
      TuneCandidate c;
      c.config_id = rc.config.id();
      c.config = rc.config.to_json();
      try {
        c.job = build_job(rc.config);
      } catch (const Error& e) {
        c.rejected = e.what();
      }
      out.push_back(std::move(c));
    }
    return out;
  };
  s.rebuild = [](const json& config) { return build_job(GemmConfig::from_json(config)); };
  s.measure_request = [&](const BuiltLibraries& libraries) { return measure_request(problem, libraries); };
  // 3xTF32 promises fp32 accuracy: no worse than twice cuBLAS fp32's own error against float64.
  if (problem.numerics == Numerics::x3tf32) {
    s.accuracy_shortfall = [](const CandidateRecord& rec, const TuneOutcome& so_far) -> std::string {
      if (!rec.rel_err || !so_far.fp32_reference_err || *rec.rel_err <= 2.0 * *so_far.fp32_reference_err) return "";
      return fmt::format("rel err {:.2e} is over twice cuBLAS fp32's {:.2e}: not fp32-accurate", *rec.rel_err,
                         *so_far.fp32_reference_err);
    };
  }
  return tune_candidates(s, db, o);
}

}  // namespace fact::realize
