#include "compose/module_writer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <map>

#include "compose/channels_last.h"
#include "compose/family_call.h"
#include "compose/python_expr.h"
#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "realize/families/gemm/gemm_epilogue.h"
#include "realize/template_renderer.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace fact::compose {
namespace {


// The GEMM epilogue a verdict's op runs (a predefined name such as "bias_gelu_tanh", or an epilogue tree's JSON):
// its tuned problem's, else its config's; "" for families without one.
json epilogue_of(const PatternVerdict& v) {
  const json none = json::object();
  const json& problem = v.row.is_object() && v.row.contains("problem") && v.row["problem"].is_object() ? v.row["problem"] : none;
  const json& config = v.row.is_object() && v.row.contains("config") && v.row["config"].is_object() ? v.row["config"] : none;
  if (problem.contains("epilogue")) return problem["epilogue"];
  return config.value("epilogue", json(""));
}

std::string epilogue_text(const json& epilogue) {
  return epilogue.is_string() ? epilogue.get<std::string>() : epilogue.dump();
}

// A reason as the text of one Python comment line: a multi-line reason (an exception with PyTorch's dispatcher
// table) would otherwise end the comment and break the module; manifest.json keeps it whole.
std::string comment_text(const std::string& reason) {
  constexpr size_t kMax = 400;
  std::string line;
  for (char c : reason) {
    bool space = c == '\n' || c == '\r' || c == '\t' || c == ' ';
    if (space && (line.empty() || line.back() == ' ')) continue;
    line += space ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line.size() > kMax ? line.substr(0, kMax) + " ... (manifest.json has it whole)" : line;
}

std::string pattern_summary(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts) {
  std::string s;
  for (const auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    std::string epilogue = epilogue_text(epilogue_of(v));
    s += !v.accepted ? fmt::format("#   {} at {}: {}\n", m.rule, m.anchor, comment_text(v.reason))
                     : fmt::format("#   {} at {}: FACT op torch.ops.fact.{} ({})\n", m.rule, m.anchor, v.op_name,
                                   epilogue.empty() ? v.family : "epilogue " + epilogue);
  }
  if (s.empty()) s = "#   (none: the plan has no entries, so forward is PyTorch's graph replayed)\n";
  return s;
}

// How forward was called when traced. IRs written before the tracer recorded it held positional tensor
// arguments only and one result or a tuple of them: the same guards, spelled with null specs.
json call_structure(const ir::Graph& g) {
  if (!g.call.is_null()) return g.call;
  json inputs = json::array();
  for (const auto& n : g.nodes)
    if (n.kind == ir::NodeKind::Input)
      inputs.push_back(n.outputs.empty() ? json{{"value", nullptr}} : json{{"shape", n.out().shape}});
  return {{"in_spec", nullptr}, {"out_spec", g.outputs.size() == 1 ? json("leaf") : json(nullptr)}, {"inputs", inputs}};
}

std::string render_module(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts, const json* call,
                          const std::string& body, const json& state = json::array()) {
  const ir::Graph& g = plan.graph;
  return realize::render_template_file("compose/model_new.py.in",
                                       {{"source_file", g.source_path},
                                        {"module_class", g.module_class},
                                        {"pattern_summary", pattern_summary(plan, verdicts)},
                                        {"user_file", json(kUserModelCopy).dump()},
                                        // A JSON text inside a Python string literal (JSON's escapes are Python's).
                                        {"call_json", json(call ? call->dump() : "null").dump()},
                                        {"state_json", json(state.dump()).dump()},
                                        {"replay_body", body}});
}

}  // namespace

std::string model_new_source(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts) {
  const ir::Graph& g = plan.graph;
  std::map<std::string, std::string> vars;
  std::map<std::string, const PatternVerdict*> covered_by;  // covered node -> its accepted verdict
  std::map<std::string, const PatternVerdict*> rejected_at;  // anchor -> its rejected verdict
  for (const auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    if (v.accepted) for (const auto& n : m.nodes) covered_by[n] = &v;
    else rejected_at[m.anchor] = &v;
  }
  VariableOf var = [&](const std::string& name) {
    auto it = vars.find(name);
    if (it == vars.end())
      throw Error(fmt::format("IR of {}: node '{}' is read before it is defined (or removed by a pattern); "
                              "re-run `fact discover` on the model", g.source_path, name));
    return it->second;
  };

  std::vector<std::string> params;
  json state = json::array();  // the parameters and buffers read, in order: [kind, dotted name] (model_new's _STATE)
  std::string device_source;
  std::string body;
  // Constants forward() made from Python numbers (ir::Node::value), made again once the inputs' device is known.
  std::vector<size_t> made_constants;
  auto emit_made_constants = [&] {
    for (size_t c : made_constants) {
      const ir::Node& constant = g.nodes[c];
      std::string where = fmt::format("IR constant '{}'", constant.name);
      body += fmt::format("{}v{} = _constant(self, {}, {}, torch.{}, {})  # {}\n", kIndent, c,
                          python_expr(json(constant.name), var, "None", where),
                          python_expr(constant.value, var, "None", where), constant.out().dtype,
                          device_source.empty() ? "next(self.parameters()).device" : device_source, constant.name);
    }
    made_constants.clear();
  };
  // With no FACT op accepted the original forward runs as written: replaying its ATen graph op by op can only
  // add Python dispatch time, and the composed module must never be slower than the original.
  if (covered_by.empty())
    return render_module(plan, verdicts, nullptr,
                         fmt::format("{}# No FACT op was accepted: the original forward runs unchanged.\n{}return None\n",
                                     kIndent, kIndent));
  const ChannelsLastPlan layout = channels_last_plan(plan, verdicts);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const ir::Node& node = g.nodes[i];
    std::string out = "v" + std::to_string(i);
    switch (node.kind) {
      case ir::NodeKind::Input:
        params.push_back(out);
        vars[node.name] = out;
        if (device_source.empty() && !node.outputs.empty()) device_source = out + ".device";
        continue;
      case ir::NodeKind::Parameter:
      case ir::NodeKind::Buffer:
        body += fmt::format("{}{} = state[{}]  # {}\n", kIndent, out, state.size(), node.name);
        state.push_back({node.kind == ir::NodeKind::Parameter ? "parameter" : "buffer", node.target});
        break;
      case ir::NodeKind::Constant:
        if (!node.value.is_null()) {  // made by forward from Python numbers: made again, once, where the inputs are
          made_constants.push_back(i);
          vars[node.name] = out;
          continue;
        }
        // Lifted constants are plain attributes of the module, not registered parameters or buffers.
        body += fmt::format("{}{} = self.{}  # {}\n", kIndent, out, node.target, node.name);
        break;
      case ir::NodeKind::Op: {
        emit_made_constants();  // every placeholder precedes the ops: the inputs' device is known here
        if (auto it = covered_by.find(node.name); it != covered_by.end()) {
          const auto& m = plan.entries[it->second->entry].match;
          if (node.name != m.anchor) continue;  // folded into the fact op call at the anchor
          body += family_call(m, *it->second, g, var, out, layout.writes.count(node.name) > 0);
          // Values the op also returns (a residual sum read again later), defined here for their later readers.
          for (const auto& [graph_node, name] : extra_output_variables(m, out)) vars[graph_node] = name;
          break;
        }
        if (auto it = rejected_at.find(node.name); it != rejected_at.end())
          body += fmt::format("{}# {} ends here: {}\n", kIndent, plan.entries[it->second->entry].match.rule,
                              comment_text(it->second->reason));
        std::string where = fmt::format("IR node '{}' ({})", node.name, node.op);
        // The IR was traced on another device (often meta); tensors are created where the inputs live.
        std::string device = device_source.empty() ? "next(self.parameters()).device" : device_source;
        if (node.op == "getitem") {
          body += fmt::format("{}{} = {}[{}]  # {}\n", kIndent, out, python_expr(node.args.at(0), var, device, where),
                              python_expr(node.args.at(1), var, device, where), node.name);
          break;
        }
        std::string call;
        for (const auto& a : node.args) call += (call.empty() ? "" : ", ") + python_expr(a, var, device, where);
        for (const auto& [key, value] : node.kwargs.items())
          call += (call.empty() ? "" : ", ") + key + "=" + python_expr(value, var, device, where);
        body += fmt::format("{}{} = torch.ops.{}({})  # {}\n", kIndent, out, node.op, call, node.name);
        if (layout.contiguous.count(node.name))
          body += fmt::format("{}{} = {}.contiguous()  # channels-last from FACT's convolutions; a reader needs PyTorch's "
                              "order\n", kIndent, out, out);
        break;
      }
    }
    vars[node.name] = out;
  }
  emit_made_constants();
  std::vector<std::string> results;
  for (const auto& o : g.outputs) results.push_back(python_expr(o, var, "None", "graph outputs"));
  std::string unpack = params.empty() ? "" : fmt::format("{}{}, = flat  # forward's arguments, flattened\n", kIndent,
                                                         fmt::join(params, ", "));
  std::string reads = state.empty() ? "" : fmt::format("{}state = _state(self)  # _STATE's tensors\n", kIndent);
  body = unpack + reads + body + fmt::format("{}return _results([{}])\n", kIndent, fmt::join(results, ", "));
  json call = call_structure(g);
  return render_module(plan, verdicts, &call, body, state);
}

namespace {

// The accepted ops' entries of the op library's manifest (DIR/manifest.json beside libfact_ops.so): what a
// reader of the artifact needs to know about each kernel, with the toolchain that built it.
json kernels_of(const ComposeSources& sources, const std::vector<std::string>& ops) {
  json kernels = json::array();
  if (sources.op_library.empty()) return kernels;
  fs::path lib_manifest = fs::path(sources.op_library).parent_path() / "manifest.json";
  if (!fs::is_regular_file(lib_manifest)) return kernels;
  json m = read_json_file(lib_manifest, "op library manifest");
  for (const auto& op : m.value("ops", json::array())) {
    if (std::find(ops.begin(), ops.end(), op.value("name", "")) == ops.end()) continue;
    json k = json::object();
    for (const char* key : {"name", "family", "config_id", "summary", "config", "numerics", "arch", "gencode", "epilogue",
                            "element_in", "element_out", "cutlass_version", "nvcc_version"})
      k[key] = op.value(key, json(nullptr));
    kernels.push_back(k);
  }
  return kernels;
}

}  // namespace

json composed_manifest(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts,
                       const ComposeSources& sources) {
  json accepted = json::array(), rejected = json::array();
  std::vector<std::string> ops;
  for (const auto& v : verdicts)
    if (v.accepted) ops.push_back(v.op_name);
  json kernels = kernels_of(sources, ops);
  json toolchain = {{"cutlass_version", nullptr}, {"nvcc_version", nullptr}};
  if (!kernels.empty())
    toolchain = {{"cutlass_version", kernels[0]["cutlass_version"]}, {"nvcc_version", kernels[0]["nvcc_version"]}};
  for (const auto& v : verdicts) {
    const auto& m = plan.entries[v.entry].match;
    json base = {{"pattern", m.rule}, {"anchor", m.anchor}, {"nodes", m.nodes}};
    if (v.accepted) {
      base["op"] = v.op_name;
      base["family"] = v.family;
      base["epilogue"] = epilogue_of(v);
      // A GEMM's tree and its activations' table entries: the CPU reference op evaluates them without FACT.
      if (v.family == "gemm" && base["epilogue"] != json(""))
        base.update(realize::epilogue_reference_json(realize::Epilogue::from_json(base["epilogue"])));
      // The reference ops (reference_ops.py) read a family op's kind from its config.
      base["config"] = v.row.value("config", json(nullptr));
      base["b_layout"] = m.attrs.count("b_layout") ? m.attrs.at("b_layout") : json("kn");
      for (const char* k : {"winner", "fact_ms", "baseline_ms", "speedup", "rel_err", "library", "status"})
        base[k] = v.row.value(k, json(nullptr));
      accepted.push_back(base);
    } else {
      base["reason"] = v.reason;
      rejected.push_back(base);
    }
  }
  return {{"format", "fact-composed-module"},
          {"version", kComposedManifestVersion},
          {"source", {{"path", sources.model.string()}, {"copy", kUserModelCopy},
                      {"sha256", plan.graph.source_sha256}, {"module_class", plan.graph.module_class}}},
          {"module", kComposedModuleFile},
          {"class", "ModelNew"},
          {"numerics", plan.numerics},
          {"arch", plan.arch},
          {"plan", sources.plan},
          {"tune_report", sources.tune_report},
          // Relative to this folder: the library travels with the module (see write_composed_module).
          {"op_library", sources.op_library.empty() ? json(nullptr) : json(kOpLibraryCopy)},
          {"op_library_built_at", sources.op_library.empty() ? json(nullptr) : json(sources.op_library)},
          {"kernels", kernels},
          {"toolchain", toolchain},
          {"reference_ops", kReferenceOpsCopy},
          {"accepted", accepted},
          {"rejected", rejected}};
}

std::vector<PatternVerdict> write_composed_module(const discover::Plan& plan, std::vector<PatternVerdict> verdicts,
                                                 const ComposeSources& sources, const fs::path& dir) {
  std::string module;
  json original_forward = plan.graph.replay_blocker.empty() ? json(nullptr) : json(plan.graph.replay_blocker);
  try {
    module = model_new_source(plan, verdicts);
  } catch (const Error& e) {
    // The graph cannot be written back as Python: every pattern stays PyTorch's and the original forward runs.
    original_forward = e.what();
    std::string reason = std::string("the composed module runs the original forward: ") + e.what();
    for (auto& v : verdicts)
      if (v.accepted) {
        v.accepted = false;
        v.reason = reason;
      }
    module = model_new_source(plan, verdicts);
  }
  std::string user = read_text_file(sources.model, "model file");
  json manifest_json = composed_manifest(plan, verdicts, sources);
  manifest_json["original_forward"] = original_forward;  // why forward is the user's own, where it has to be
  std::string manifest = manifest_json.dump(1) + "\n";
  if (!sources.op_library.empty() && !fs::is_regular_file(sources.op_library))
    throw Error(fmt::format("op library {} does not exist; build it with `fact ops build REPORT.json --out DIR "
                            "--compile`, or leave out --op-library", sources.op_library));

  if (fs::exists(dir)) {
    fs::path old = dir / "manifest.json";
    bool ours = false;
    if (fs::exists(old)) {
      try { ours = read_json_file(old, "manifest").value("format", "") == "fact-composed-module"; } catch (const Error&) {}
    }
    if (!ours)
      throw Error(fmt::format("output folder {} exists and holds no composed module; pass a new folder to --out",
                              dir.string()));
  }
  fs::path tmp = dir.string() + fmt::format(".tmp-{}", ::getpid());
  try {
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    write_file_atomic(tmp / kComposedModuleFile, module);
    write_file_atomic(tmp / kUserModelCopy, user);
    write_file_atomic(tmp / "manifest.json", manifest);
    // The folder is the artifact: the library and the reference ops travel with the module.
    if (!sources.op_library.empty()) fs::copy_file(sources.op_library, tmp / kOpLibraryCopy);
    fs::copy_file(python_dir() / "fact" / "compose" / "reference_ops.py", tmp / kReferenceOpsCopy);
    fs::create_directories(tmp / kReferenceDirCopy);
    for (const auto& f : fs::directory_iterator(python_dir() / "fact" / "compose" / "reference"))
      if (f.path().extension() == ".py") fs::copy_file(f.path(), tmp / kReferenceDirCopy / f.path().filename());
    // The GEMM reference op reads the predefined epilogue trees and the activation table from here.
    fs::create_directories(tmp / kReferenceDirCopy / "epilogues");
    for (const char* f : {"named.json", "activations.json"})
      fs::copy_file(data_dir() / "epilogues" / f, tmp / kReferenceDirCopy / "epilogues" / f);
    if (fs::exists(dir)) fs::remove_all(dir);
    fs::rename(tmp, dir);
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw;
  }
  return verdicts;
}

}  // namespace fact::compose
