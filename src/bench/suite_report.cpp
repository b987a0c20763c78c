#include "bench/suite_report.h"

#include <fmt/format.h>

#include "bench/suite_metrics.h"
#include "core/files.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace fact::bench {
namespace {

std::string num(const json& v, const char* spec = "{:.3g}") {
  return v.is_number() ? fmt::format(fmt::runtime(spec), v.get<double>()) : "—";
}

std::string frac(const json& v) { return v.is_number() ? fmt::format("{:.2f}", v.get<double>()) : "—"; }

std::string cell(std::string s) {  // a Markdown table cell on one line
  for (char& c : s)
    if (c == '\n' || c == '|') c = c == '|' ? '/' : ' ';
  return s;
}

}  // namespace

json suite_json(const SuiteInfo& info, const std::vector<ProblemResult>& results) {
  json problems = json::array(), levels = json::array();
  for (const auto& r : results) problems.push_back(to_json(r));
  for (const auto& m : suite_metrics(results)) levels.push_back(to_json(m));
  return {{"format", "fact-bench-suite"},
          {"version", 1},
          {"suite_dir", info.suite_dir},
          {"arch", info.arch},
          {"numerics", info.numerics.empty() ? "default" : info.numerics},
          {"top", info.top},
          {"jobs", info.jobs},
          {"gpus", info.gpus},
          {"conv_numerics", info.conv_numerics.empty() ? "tf32" : info.conv_numerics},
          {"definitions",
           {{"measured", "correct + incorrect + failed; problems without a GPU run or not yet run are left out"},
            {"correct_fraction", "correct / measured"},
            {"fast_p", "(correct and speedup > p) / measured, KernelBench's fast_p; vs_compile counts only problems "
                       "whose torch.compile time was measured"},
            {"geomean_speedup", "geometric mean of the speedup over the correct problems that have one"},
            {"fact_ops", "graph op nodes inside the patterns the composed module runs as FACT kernels (of graph_ops, "
                         "the graph's op nodes without views)"}}},
          {"levels", levels},
          {"problems", problems}};
}

std::string suite_markdown(const json& s) {
  std::string md = fmt::format("# FACT bench: {}\n\narch {}, numerics {} (convolutions {}), {} candidates per pattern, {} "
                               "worker(s){}\n\n",
                               s.at("suite_dir").get<std::string>(), s.at("arch").get<std::string>(),
                               s.at("numerics").get<std::string>(), s.value("conv_numerics", std::string("tf32")),
                               s.at("top").get<int>(), s.at("jobs").get<int>(),
                               s.at("gpus").empty() ? ", no GPU" : fmt::format(", GPUs {}", s.at("gpus").dump()));
  md += "## Per level\n\n| level | problems | measured | correct | incorrect | failed | fast_1.0 | fast_1.5 | fast_2.0 |"
        " geomean vs eager | fast_1.0 vs compile | geomean vs compile |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  int not_measured = 0, compile_measured = 0;
  for (const auto& l : s.at("levels")) {
    const json& f = l.at("fast_p");
    md += fmt::format("| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} | {} | {} |\n", l.at("level").get<std::string>(),
                      l.at("problems").get<int>(), l.at("measured").get<int>(), l.at("correct").get<int>(),
                      frac(l.at("correct_fraction")), l.at("incorrect").get<int>(), l.at("failed").get<int>(),
                      frac(f.at("fast_1.0").at("vs_eager")),
                      frac(f.at("fast_1.5").at("vs_eager")), frac(f.at("fast_2.0").at("vs_eager")),
                      num(l.at("geomean_speedup_eager"), "{:.2f}x"), frac(f.at("fast_1.0").at("vs_compile")),
                      num(l.at("geomean_speedup_compile"), "{:.2f}x"));
    if (l.at("level") == "all") {
      not_measured = l.at("not_measured").get<int>();
      compile_measured = l.at("compile_measured").get<int>();
    }
  }
  md += "\nmeasured = correct + incorrect + failed: a problem whose `fact optimize` failed or crashed is measured and "
        "not correct (its reason is below); only problems never started are left out.\n";
  md += "\nfast_p: the fraction of measured problems that are correct and faster than eager PyTorch by more than p "
        "(same numerics); geomean over the correct problems. — means nothing to measure.\n";
  if (not_measured > 0)
    md += fmt::format("\n**{} problem(s) not measured** (no GPU on the machine that ran them, or not run yet): left out "
                      "of every fraction; see their reasons below.\n", not_measured);
  if (compile_measured == 0) md += "\ntorch.compile: not measured in this run (no compile timings reported).\n";

  md += "\n## Per problem\n\n`FACT ops`: patterns the composed module runs as FACT kernels (in parentheses: the graph ops they cover / the graph's ops); with 0 it runs the original "
        "forward unchanged (every pattern lost to PyTorch or fell back), so its time differs from eager's by "
        "measurement noise only. `reduce-overhead ms`: torch.compile(mode=\"reduce-overhead\"), its CUDA graphs (the "
        "counterpart of a composed module replayed as one CUDA graph, where the end-to-end check chose that).\n\n"
        "| problem | status | FACT ops | eager ms | FACT ms | vs eager | torch.compile ms | vs compile | "
        "reduce-overhead ms | rel err FACT / eager | why |\n|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& p : s.at("problems")) {
    std::string rel = p.at("rel_err_composed").is_number()
                          ? num(p.at("rel_err_composed")) + " / " + num(p.at("rel_err_original"))
                          : "—";
    std::string ops = p.at("fact_patterns").is_number_integer() ? std::to_string(p.at("fact_patterns").get<int>()) : "—";
    if (p.value("fact_ops", json()).is_number_integer() && p.value("graph_ops", json()).is_number_integer())
      ops += fmt::format(" ({}/{})", p.at("fact_ops").get<int>(), p.at("graph_ops").get<int>());
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", p.at("id").get<std::string>(),
                      p.at("status").get<std::string>(), ops, num(p.at("eager_ms")), num(p.at("composed_ms")),
                      num(p.at("speedup_eager"), "{:.2f}x"), num(p.at("compile_default_ms")),
                      num(p.at("speedup_compile"), "{:.2f}x"), num(p.value("compile_reduce_overhead_ms", json())), rel,
                      cell(p.at("reason").get<std::string>()));
  }
  return md;
}

void write_suite_report(const fs::path& out, const SuiteInfo& info, const std::vector<ProblemResult>& results) {
  json s = suite_json(info, results);
  write_file_atomic(out / "suite.json", s.dump(1) + "\n");
  write_file_atomic(out / "suite.md", suite_markdown(s));
}

}  // namespace fact::bench
