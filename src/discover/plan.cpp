#include "discover/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <set>

#include "core/error.h"
#include "discover/epilogue_growth.h"
#include "discover/matcher.h"
#include "discover/rowwise_regions.h"
#include "ir/ir_io.h"

namespace fact::discover {
using nlohmann::json;

Numerics default_numerics(const ir::Graph& graph) {
  // User inputs decide; a graph whose inputs are not floating (token ids) takes its weights' dtype.
  for (bool inputs_only : {true, false}) {
    bool floating = false;
    for (auto& n : graph.nodes) {
      if (n.kind == ir::NodeKind::Op || (inputs_only && n.kind != ir::NodeKind::Input)) continue;
      for (auto& o : n.outputs) {
        if (o.dtype == "bfloat16") return Numerics::bf16;
        if (o.dtype == "float16") return Numerics::fp16;
        floating = floating || o.dtype == "float32" || o.dtype == "float64";
      }
    }
    if (floating) break;
  }
  return Numerics::x3tf32;
}

Plan make_plan(const ir::Graph& graph, const PatternRegistry& registry, const ir::OpTable& ops,
               const ArchSpec& arch, Numerics numerics, Numerics conv_numerics) {
  if (conv_numerics != Numerics::tf32 && conv_numerics != Numerics::x3tf32)
    throw Error("conv numerics " + to_string(conv_numerics) + ": fp32 convolutions run tf32 (PyTorch's cuDNN "
                "default) or 3xtf32 (fp32-accurate, against cuDNN with TF32 off)");
  Plan plan;
  plan.arch = arch.arch;
  plan.numerics = numerics;
  plan.conv_numerics = conv_numerics;
  plan.graph = graph;
  plan.notes = graph.notes;  // the tracer's rewrites (a folded attention mask) first: they shaped what matched
  CostContext ctx{plan.graph, arch, numerics, conv_numerics};

  // A graph FACT cannot write back as ATen calls stays PyTorch's whole: matching it would only cost tuning time.
  std::vector<NearMiss> near_misses;
  auto found = graph.replay_blocker.empty()
                   ? find_all_matches(plan.graph, registry, ops, arch, &plan.notes, &near_misses)
                   : std::vector<Match>{};
  std::map<std::string, CostEstimate> costs;  // keyed by rule + anchor (unique per match)
  auto key = [](const Match& m) { return m.rule + "@" + m.anchor; };
  std::vector<Match> matches;
  for (auto& m : found) {
    try {
      costs[key(m)] = estimate_match(m, ctx);
      matches.push_back(std::move(m));
    } catch (const std::exception& e) {
      plan.notes.push_back(fmt::format("{} at node '{}' left out: the cost model cannot estimate it ({})", m.rule,
                                       m.anchor, e.what()));
    }
  }
  auto kept = resolve_overlaps(std::move(matches), [&](const Match& m) { return costs.at(key(m)).gain_seconds(); });
  grow_gemm_epilogues(kept, plan.graph, &plan.notes);
  for (auto& m : kept) {
    // A grown match covers more nodes than the estimate made when it was found.
    if (m.kernel.contains("epilogue_tree")) costs[key(m)] = estimate_match(m, ctx);
    plan.entries.push_back({m, costs.at(key(m))});
  }
  add_generated_rowwise_entries(plan, ctx);  // what no rule took: generated row-wise kernels (rowwise_regions.h)
  std::stable_sort(plan.entries.begin(), plan.entries.end(), [](const PlanEntry& a, const PlanEntry& b) {
    return a.cost.gain_seconds() > b.cost.gain_seconds();
  });

  try {
    plan.seconds_now = estimate_graph_seconds(ctx);
  } catch (const std::exception& e) {
    plan.notes.push_back(fmt::format("no estimate of the whole module's time: {}", e.what()));
  }
  plan.seconds_planned = plan.seconds_now;
  std::set<std::string> covered;
  for (auto& e : plan.entries) {
    if (e.cost.gain_seconds() > 0) plan.seconds_planned -= e.cost.gain_seconds();
    covered.insert(e.match.nodes.begin(), e.match.nodes.end());
  }
  for (auto& n : plan.graph.nodes) {
    if (n.kind != ir::NodeKind::Op || covered.count(n.name) || n.op == "getitem") continue;
    if (n.category == ir::OpCategory::View) continue;
    plan.uncovered_ops[n.op]++;
  }
  // A node left to PyTorch that a rule's pattern matched says which of the rule's constraints kept it out.
  std::set<std::string> explained;
  for (const auto& miss : near_misses) {
    if (covered.count(miss.node) || !explained.insert(miss.node).second) continue;
    plan.notes.push_back(fmt::format("{} at node '{}' stays PyTorch's: rule '{}' needs {}",
                                     plan.graph.at(miss.node).op, miss.node, miss.rule, miss.why));
  }
  return plan;
}

static json cost_to_json(const CostEstimate& c) {
  return {{"flops", c.flops},
          {"bytes_now", c.bytes_now},
          {"bytes_fused", c.bytes_fused},
          {"kernels_now", c.kernels_now},
          {"us_now", c.seconds_now * 1e6},
          {"us_fused", c.seconds_fused * 1e6},
          {"gain_us", c.gain_seconds() * 1e6},
          {"speedup", c.speedup()},
          {"bound", c.bound}};
}

static json match_to_json(const Match& m) {
  return {{"rule", m.rule},       {"family", m.family}, {"anchor", m.anchor}, {"nodes", m.nodes},
          {"extra_outputs", m.extra_outputs},
          {"inputs", m.inputs},   {"attrs", m.attrs},   {"dims", m.dims},     {"dtype", m.dtype},
          {"kernel", m.kernel},   {"examples", m.examples}, {"priority", m.priority}};
}

std::string left_to_pytorch(const Plan& plan) {
  if (!plan.graph.replay_blocker.empty()) return "the whole module: " + plan.graph.replay_blocker;
  std::vector<std::string> parts;
  for (auto& [op, n] : plan.uncovered_ops) parts.push_back(fmt::format("{} x{}", op, n));
  return fmt::format("{}", fmt::join(parts, ", "));
}

json to_json(const Plan& plan) {
  json entries = json::array();
  int rank = 1;
  for (auto& e : plan.entries) {
    json j = match_to_json(e.match);
    j["rank"] = rank++;
    j["cost"] = cost_to_json(e.cost);
    entries.push_back(std::move(j));
  }
  return {{"format", "fact-plan"},
          {"version", kPlanVersion},
          {"arch", to_string(plan.arch)},
          {"numerics", to_string(plan.numerics)},
          {"baseline_numerics", to_string(baseline_numerics(plan.numerics))},
          {"conv_numerics", to_string(plan.conv_numerics)},
          {"source", plan.graph.source_path},
          {"estimate", {{"us_now", plan.seconds_now * 1e6}, {"us_planned", plan.seconds_planned * 1e6}}},
          {"uncovered_ops", plan.uncovered_ops},
          {"left_to_pytorch", left_to_pytorch(plan)},
          {"notes", plan.notes},
          {"patterns", entries},
          {"ir", ir::to_json(plan.graph)}};
}

Plan plan_from_json(const json& doc, const std::string& origin, const ir::OpTable& ops) {
  auto field = [&](const json& j, const char* name, const std::string& where) -> const json& {
    if (!j.is_object() || !j.contains(name)) throw Error(origin + ": " + where + " has no field '" + name + "'");
    return j.at(name);
  };
  // Compared as JSON values: value<T>() would throw a bare json::type_error on a mistyped field.
  if (!doc.is_object() || !doc.contains("format") || doc["format"] != "fact-plan")
    throw Error(origin + ": not a FACT plan (field 'format' must be \"fact-plan\"); write one with `fact discover --json`");
  if (!doc.contains("version") || doc["version"] != kPlanVersion)
    throw Error(origin + ": plan version " + doc.value("version", json(0)).dump() + " is not supported (expected " +
                std::to_string(kPlanVersion) + "); re-run `fact discover`");
  Plan plan;
  try {
    plan.arch = arch_from_string(field(doc, "arch", "plan").get<std::string>());
    plan.numerics = numerics_from_string(field(doc, "numerics", "plan").get<std::string>());
    // Plans written before convolutions had numerics of their own ran them in TF32.
    plan.conv_numerics = numerics_from_string(doc.value("conv_numerics", std::string("tf32")));
    plan.graph = ir::parse_graph(field(doc, "ir", "plan"), origin + " (embedded IR)", ops);
    plan.notes = doc.value("notes", std::vector<std::string>{});
    int i = 0;
    for (auto& p : field(doc, "patterns", "plan")) {
      std::string where = "pattern #" + std::to_string(++i);
      PlanEntry e;
      Match& m = e.match;
      m.rule = field(p, "rule", where).get<std::string>();
      m.family = field(p, "family", where).get<std::string>();
      m.anchor = field(p, "anchor", where).get<std::string>();
      m.nodes = field(p, "nodes", where).get<std::vector<std::string>>();
      // Absent in plans written before rules could export intermediates: none then.
      m.extra_outputs = p.value("extra_outputs", json::object()).get<std::map<std::string, std::string>>();
      m.inputs = field(p, "inputs", where).get<std::map<std::string, std::string>>();
      m.attrs = field(p, "attrs", where).get<std::map<std::string, json>>();
      m.dims = field(p, "dims", where).get<std::map<std::string, int64_t>>();
      m.dtype = field(p, "dtype", where).get<std::string>();
      m.kernel = field(p, "kernel", where);
      m.examples = field(p, "examples", where).get<std::vector<std::string>>();
      m.priority = p.value("priority", 0);
      const json& c = field(p, "cost", where);
      e.cost.flops = c.value("flops", 0.0);
      e.cost.bytes_now = c.value("bytes_now", 0.0);
      e.cost.bytes_fused = c.value("bytes_fused", 0.0);
      e.cost.kernels_now = c.value("kernels_now", 0);
      e.cost.seconds_now = c.value("us_now", 0.0) * 1e-6;
      e.cost.seconds_fused = c.value("us_fused", 0.0) * 1e-6;
      e.cost.bound = c.value("bound", "");
      for (auto& n : m.nodes)
        if (!plan.graph.find(n)) throw Error(origin + ": " + where + " covers node '" + n + "', which the IR lacks");
      if (!plan.graph.find(m.anchor)) throw Error(origin + ": " + where + " has anchor '" + m.anchor + "', which the IR lacks");
      for (auto& [id, n] : m.extra_outputs)
        if (std::find(m.nodes.begin(), m.nodes.end(), n) == m.nodes.end())
          throw Error(origin + ": " + where + " exports '" + n + "' (" + id + "), which it does not cover");
      for (auto& [var, n] : m.inputs)
        if (!plan.graph.find(n)) throw Error(origin + ": " + where + " binds " + var + " to '" + n + "', which the IR lacks");
      plan.entries.push_back(std::move(e));
    }
  } catch (const json::exception& ex) {
    throw Error(origin + ": malformed plan: " + ex.what());
  }
  return plan;
}

static std::string dims_text(const Match& m) {
  std::string s;
  for (auto& [k, v] : m.dims) s += fmt::format("{}{}={}", s.empty() ? "" : " ", k, v);
  return s;
}

static std::string us(double seconds) {
  double u = seconds * 1e6;
  return u >= 1000 ? fmt::format("{:.2f} ms", u / 1000) : fmt::format("{:.1f} us", u);
}

Numerics family_numerics(const Plan& plan, const std::string& family, Numerics numerics) {
  return family == "conv" ? convolution_numerics(numerics, plan.conv_numerics) : numerics;
}

std::string format_plan(const Plan& plan) {
  std::string out = fmt::format("FACT plan for {} on {} (numerics {}, PyTorch baseline {}{})\n", plan.graph.source_path,
                                to_string(plan.arch), to_string(plan.numerics),
                                to_string(baseline_numerics(plan.numerics)),
                                convolution_numerics(plan.numerics, plan.conv_numerics) == Numerics::x3tf32
                                    ? "; convolutions 3xtf32 against cuDNN with TF32 off"
                                    : "");
  out += fmt::format("{:>2}  {:<24} {:>5}  {:<34} {:<8} {:>21}  {:>9} {:>6}  {}\n", "#", "pattern", "nodes",
                     "shape", "dtype", "est. now -> fused", "gain", "x", "examples");
  int rank = 1;
  for (auto& e : plan.entries) {
    const Match& m = e.match;
    std::string ex = m.examples.empty() ? "-" : m.examples.front();
    if (m.examples.size() > 1) ex += fmt::format(" (+{})", m.examples.size() - 1);
    out += fmt::format("{:>2}  {:<24} {:>5}  {:<34} {:<8} {:>21}  {:>9} {:>6.2f}  {}\n", rank++, m.rule, m.nodes.size(),
                       dims_text(m), m.dtype, us(e.cost.seconds_now) + " -> " + us(e.cost.seconds_fused),
                       us(e.cost.gain_seconds()), e.cost.speedup(), ex);
    std::string also;
    for (auto& [id, n] : m.extra_outputs) also += fmt::format("{}{} ({})", also.empty() ? "; also writes " : ", ", n, id);
    if (m.kernel.contains("epilogue_grown_over"))
      also += fmt::format("; epilogue grown over {}", fmt::join(m.kernel["epilogue_grown_over"].get<std::vector<std::string>>(), ", "));
    out += fmt::format("    covers {} (anchor {}{})\n", fmt::join(m.nodes, ", "), m.anchor, also);
  }
  if (plan.entries.empty())
    out += plan.graph.replay_blocker.empty() ? "    (no pattern of the registry matched)\n" : "    (nothing matched)\n";
  out += fmt::format("Estimated module time: {} in PyTorch now -> {} with the plan ({:.2f}x; roofline estimate, not a measurement)\n",
                     us(plan.seconds_now), us(plan.seconds_planned),
                     plan.seconds_planned > 0 ? plan.seconds_now / plan.seconds_planned : 0.0);
  if (std::string left = left_to_pytorch(plan); !left.empty()) out += fmt::format("Left to PyTorch: {}\n", left);
  for (const auto& note : plan.notes) out += "Note: " + note + "\n";
  return out;
}

}  // namespace fact::discover
