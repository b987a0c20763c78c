// The rowwise family behind the KernelFamily seam. A match of discover's generated row-wise pass (kernel kind
// "ir") carries its fragment: the kernel is generated from the IR (rowwise_codegen.h) and tuned over the
// family's config space. For a registry pattern, the one candidate per match is the registered kernel
// itself (the agent already searched the configs): the match's registry entry gives the kernel source and
// the fragment it was verified on, a generated shim exports it under the family ABI (can_implement refuses
// other row lengths), and the measure worker verifies it again against the fragment replayed in float64.
#include "realize/kernel_family.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "core/error.h"
#include "discover/row_program.h"
#include "discover/user_registry.h"
#include "realize/families/rowwise/rowwise_codegen.h"
#include "realize/candidate_tuner.h"
#include "realize/family_codegen.h"
#include "realize/template_renderer.h"

namespace fact::realize {
namespace {

using nlohmann::json;

constexpr int kMaxInputs = 8;  // FACT_ROWWISE_MAX_INPUTS in kernel_abi.h

std::string source_hash(const std::string& text) { return config_hash_id("", json(text)); }

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(fmt::format("{}: missing \"{}\"", where, key));
  return j.at(key);
}

// The registry entry a config or problem names, checked to hold the very kernel it was tuned with.
discover::RegistryEntry entry_for(const json& c) {
  std::string name = field(c, "entry", "rowwise config").get<std::string>();
  auto entry = discover::UserRegistry::open_default().get(name);
  if (source_hash(entry.kernel_source) != field(c, "source_hash", "rowwise config").get<std::string>())
    throw Error(fmt::format("registry entry '{}' ({}) holds another kernel than the one tuned; tune the pattern again",
                            name, entry.dir.string()));
  return entry;
}

std::vector<bool> broadcast_of(const json& c) {
  std::vector<bool> out;
  for (const auto& b : field(c, "broadcast", "rowwise config")) out.push_back(b.get<bool>());
  return out;
}

bool generated(const json& j) { return j.value("generated", false); }

// Generated configs are named by what the kernel depends on (not the row count): the fragment's program,
// cols, dtype and the launch shape.
std::string config_id_of(const json& c) {
  if (!generated(c)) return "rowwise_" + field(c, "entry", "rowwise config").get<std::string>();
  json f = field(c, "fragment", "rowwise config");
  f.erase("rows");
  f.erase("full_shape");  // shapes carry the row count; dtype, cols and trailing dims are in the key
  for (auto& n : f["nodes"]) n.erase("outputs");
  for (auto& i : f["inputs"])
    if (!i.value("window", false)) i.erase("shape");  // a pool's input's shape sets its window's constants
  return config_hash_id("rowwise_g", {{"fragment", f}, {"cols", c.at("cols")}, {"dtype", c.at("dtype")},
                                      {"kernel", c.at("kernel")}, {"arch", c.at("arch")}});
}

class RowwiseFamily final : public KernelFamily {
 public:
  std::string name() const override { return "rowwise"; }

  json problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics, Arch arch) const override {
    std::string where = fmt::format("pattern {} at node '{}'", m.rule, m.anchor);
    if (m.kernel.value("kind", "") == "ir") return generated_problem(m, numerics, arch, where);
    std::string name = m.kernel.value("registry_entry", std::string());
    if (name.empty()) throw Error(where + ": the rule's kernel block names no registry_entry");
    auto entry = discover::UserRegistry::open_default().get(name);
    const json& rec = entry.record;
    if (rec.value("family", "") != "rowwise" || !rec.contains("fragment") || !rec["fragment"].is_object())
      throw Error(fmt::format("{}: registry entry '{}' is not a row-wise entry with a fragment", where, name));
    json fragment = rec["fragment"];
    const json& inputs = field(fragment, "inputs", where + ": the entry's fragment");
    if (!inputs.is_array() || inputs.empty() || inputs.size() > kMaxInputs)
      throw Error(fmt::format("{}: the entry's fragment has {} inputs; the ABI takes 1 to {}", where, inputs.size(),
                              kMaxInputs));
    json broadcast = json::array();
    bool full = false;
    for (size_t i = 0; i < inputs.size(); ++i) {
      bool b = inputs[i].value("broadcast", false);
      full |= !b;
      broadcast.push_back(b);
      if (!match_operand_bound(m, i))
        throw Error(fmt::format("{}: the rule binds no tensor for $in{}", where, i));
    }
    if (!full) throw Error(where + ": every input is a shared row; the op takes its row count from a full input");
    const ir::Node& out = g.at(m.anchor);
    const std::string dtype = out.out().dtype;
    if (dtype != fragment.value("dtype", ""))
      throw Error(fmt::format("{}: the match is {}, the registered kernel {}", where, dtype,
                              fragment.value("dtype", "")));
    auto cols_it = m.dims.find("cols");
    auto rows_it = m.dims.find("rows");
    if (cols_it == m.dims.end() || rows_it == m.dims.end())
      throw Error(where + ": the rule gives no rows/cols dims");
    if (cols_it->second != field(fragment, "cols", where).get<int64_t>())
      throw Error(fmt::format("{}: rows of {} elements; the registered kernel was verified at {}", where,
                              cols_it->second, fragment["cols"].get<int64_t>()));
    const std::string kernel_id = rec.value("kernel", json::object()).value("id", name);
    fragment["rows"] = rows_it->second;
    return {{"entry", name},
            {"kernel_id", kernel_id},
            {"source_hash", source_hash(entry.kernel_source)},
            {"rows", rows_it->second},
            {"cols", cols_it->second},
            {"broadcast", broadcast},
            {"dtype", dtype},
            {"numerics", to_string(numerics)},
            {"arch", to_string(arch)},
            {"fragment", fragment}};
  }

  WorkloadKey workload_key(const std::string& pattern, const json& p) const override {
    if (generated(p)) {
      json f = p.at("fragment");
      json shape = {{"program", config_hash_id("", f)}, {"rows", p.at("rows")}, {"cols", p.at("cols")}};
      return make_workload_key(pattern, shape, p.at("dtype").get<std::string>(), "row", p.at("numerics").get<std::string>(),
                               p.at("arch").get<std::string>());
    }
    json shape = {{"entry", p.at("entry")}, {"source_hash", p.at("source_hash")}, {"rows", p.at("rows")},
                  {"cols", p.at("cols")}, {"broadcast", p.at("broadcast")}};
    return make_workload_key(pattern, shape, p.at("dtype").get<std::string>(), "row", p.at("numerics").get<std::string>(),
                             p.at("arch").get<std::string>());
  }

  CandidateSet candidates(const json& p, int top_n) const override {
    if (top_n < 1) return {};
    if (generated(p)) {
      auto program = discover::lower_row_program(p.at("fragment"));
      auto configs = rowwise_kernel_configs(program, field(family_data("rowwise"), "space", "data/families/rowwise.json"),
                                            ArchSpec::of(arch_from_string(p.at("arch").get<std::string>())));
      CandidateSet set;
      set.space = fmt::format("rowwise (generated from the IR, {} reductions): {} configs, top {}", program.reductions(),
                              configs.size(), top_n);
      for (const auto& k : configs) {
        if (static_cast<int>(set.ranked.size()) >= top_n) break;
        json config = {{"generated", true}, {"fragment", p.at("fragment")}, {"cols", p.at("cols")},
                       {"broadcast", p.at("broadcast")}, {"dtype", p.at("dtype")}, {"arch", p.at("arch")},
                       {"output_per_row", p.at("output_per_row")}, {"keepdim", p.at("keepdim")},
                       {"trailing_dims", p.at("trailing_dims")}, {"kernel", k.to_json()}};
        set.ranked.push_back(candidate_from_config(config));
      }
      if (set.ranked.empty()) throw Error("rowwise: no config of data/families/rowwise.json's space takes this row");
      return set;
    }
    json config = {{"entry", p.at("entry")}, {"kernel_id", p.at("kernel_id")}, {"source_hash", p.at("source_hash")},
                   {"cols", p.at("cols")}, {"broadcast", p.at("broadcast")}, {"dtype", p.at("dtype")},
                   {"arch", p.at("arch")}, {"fragment", p.at("fragment")}};
    return {{candidate_from_config(config)}, "rowwise: one candidate, the registered kernel"};
  }

  FamilyCandidate candidate_from_config(const json& c) const override {
    if (generated(c)) {
      auto program = discover::lower_row_program(field(c, "fragment", "rowwise config"));
      auto k = RowwiseKernelConfig::from_json(field(c, "kernel", "rowwise config"));
      FamilyCandidate fc;
      fc.config_id = config_id_of(c);
      fc.config = c;
      fc.summary = summary(c);
      fc.arch = arch_from_string(field(c, "arch", "rowwise config").get<std::string>());
      fc.kernel.config_id = fc.config_id;
      fc.kernel.template_name = family_template("rowwise", "generated_kernel_template");
      fc.kernel.text = render_rowwise_kernel(program, k, fc.config_id, fc.summary);
      return fc;
    }
    auto entry = entry_for(c);
    const std::string id = config_id_of(c);
    const auto broadcast = broadcast_of(c);
    FamilyCandidate fc;
    fc.config_id = id;
    fc.config = c;
    fc.summary = summary(c);
    fc.arch = arch_from_string(field(c, "arch", "rowwise config").get<std::string>());
    fc.kernel.config_id = id;
    fc.kernel.template_name = family_template("rowwise", "kernel_template");
    // The registered text stays byte for byte what was verified; the shim is rendered on its own and appended.
    fc.kernel.text = entry.kernel_source + "\n" +
                     render_template_file(fc.kernel.template_name,
                                          {{"config_id", id},
                                           {"entry", entry.name},
                                           {"kernel_id", field(c, "kernel_id", "rowwise config").get<std::string>()},
                                           {"cols", std::to_string(field(c, "cols", "rowwise config").get<int64_t>())},
                                           {"num_inputs", std::to_string(broadcast.size())}});
    return fc;
  }

  json measure_problem(const json& p) const override {
    if (generated(p)) {
      // A pointwise chain without a broadcast row runs as one flat array of any length: the verifier also
      // tries an odd element count (the kernel's scalar tail).
      const auto program = discover::lower_row_program(p.at("fragment"));
      bool flat = program.flat() &&
                  std::none_of(p.at("broadcast").begin(), p.at("broadcast").end(), [](const json& b) { return b.get<bool>(); });
      json problem = {{"entry", ""}, {"generated", true}, {"rows", p.at("rows")}, {"cols", p.at("cols")}, {"dtype", p.at("dtype")},
                      {"numerics", p.at("numerics")}, {"fragment", p.at("fragment")}, {"any_cols", flat}};
      // Rows of the last dim alone, indexed from their start, take a narrow's rows as they are (the op's row view):
      // the verifier also runs such views.
      if (takes_row_stride(program) && p.at("fragment").value("trailing_dims", 1) == 1) problem["takes_row_views"] = true;
      return problem;
    }
    return {{"entry", p.at("entry")}, {"rows", p.at("rows")}, {"cols", p.at("cols")}, {"dtype", p.at("dtype")},
            {"numerics", p.at("numerics")}, {"fragment", p.at("fragment")}};
  }

  std::string op_wrapper(const json& c) const override {
    const std::string id = config_id_of(c);
    const auto broadcast = broadcast_of(c);
    std::string params, args, flags;
    for (size_t i = 0; i < broadcast.size(); ++i) {
      params += fmt::format("{}const at::Tensor& in{}", i ? ", " : "", i);
      args += fmt::format("{}in{}", i ? ", " : "", i);
      flags += fmt::format("{}{}", i ? ", " : "", broadcast[i] ? "true" : "false");
    }
    Element e = element_from_string(field(c, "dtype", "rowwise config").get<std::string>());
    TemplateValues values = {{"config_id", id},
                             {"summary", summary(c)},
                             {"torch_dtype", torch_scalar_type(e)},
                             {"dtype", to_string(e)},
                             {"cols", std::to_string(c.at("cols").get<int64_t>())},
                             {"num_inputs", std::to_string(broadcast.size())},
                             {"broadcast", flags},
                             {"params", params},
                             {"args", args},
                             {"schema", op_schema(c)}};
    if (!generated(c)) return render_family_template("rowwise", "op_template", id, values).text;
    values["trailing_dims"] = std::to_string(c.at("trailing_dims").get<int>());
    // Strided rows: read from the fragment itself (absent for contiguous rows).
    const json& fragment = c.at("fragment");
    values["inner_dims"] = std::to_string(fragment.value("inner_dims", 0));
    values["inner"] = std::to_string(fragment.value("inner", int64_t{1}));
    std::string channels;  // a per-channel input's C (0: a full input or a shared row)
    for (size_t i = 0; i < broadcast.size(); ++i) {
      const json& in = fragment.at("inputs").at(i);
      channels += fmt::format("{}{}", i ? ", " : "", in.contains("channel") ? in["channel"].at("channels").get<int64_t>() : 0);
    }
    values["channels"] = channels;
    std::string dtypes, per_row;  // each input's dtype (the kernel's, bool: a mask, int64: an index); one value a row
    for (size_t i = 0; i < broadcast.size(); ++i) {
      const json& in = fragment.at("inputs").at(i);
      const std::string d = in.value("dtype", "");
      dtypes += fmt::format("{}{}", i ? ", " : "", d == "bool" ? "at::kBool" : d == "int64" ? "at::kLong" : torch_scalar_type(e));
      per_row += fmt::format("{}{}", i ? ", " : "", in.value("per_row", false) ? "true" : "false");
    }
    values["input_dtypes"] = dtypes;
    values["per_row"] = per_row;
    values.erase("dtype");  // the registered op's message; the generated one names each input's
    std::string windows;  // a window input's shape (a pool's input), else {}
    for (size_t i = 0; i < broadcast.size(); ++i) {
      const json& in = fragment.at("inputs").at(i);
      windows += fmt::format("{}{{{}}}", i ? ", " : "",
                             in.value("window", false) ? fmt::format("{}", fmt::join(in.at("shape").get<std::vector<int64_t>>(), ", ")) : "");
    }
    values["window_shapes"] = windows;
    values["full_shape"] = fmt::format("{}", fmt::join(fragment.value("full_shape", std::vector<int64_t>{}), ", "));
    values["output_per_row"] = c.at("output_per_row").get<bool>() ? "true" : "false";
    values["keepdim"] = c.at("keepdim").get<bool>() ? "true" : "false";
    const auto program = discover::lower_row_program(fragment);
    values["row_views"] = takes_row_stride(program) ? "true" : "false";
    values["output_pad"] = std::to_string(program.pad_lo + program.pad_hi);
    values["output_row_stride"] = std::to_string(program.output_per_row ? 1 : program.out_cols());
    return render_family_template("rowwise", "generated_op_template", id, values).text;
  }

  std::string op_schema(const json& c) const override {
    std::string params;
    for (size_t i = 0; i < broadcast_of(c).size(); ++i) params += fmt::format("{}Tensor in{}", i ? ", " : "", i);
    return config_id_of(c) + "(" + params + ") -> Tensor";
  }

  json manifest_fields(const json& c) const override { return {{"element", c.value("dtype", std::string("unknown"))}}; }

  // The registered kernel's inputs in the rule's order ($in0, $in1, ...), as the module's tensors; the op
  // returns a contiguous tensor shaped like the first full input (the anchor's shape for a row-wise chain).
  OpCall op_call(const OpCallSite& s) const override {
    const json broadcast = s.config.value("broadcast", json::array());
    if (!broadcast.is_array() || broadcast.empty())
      throw Error(s.where + ": the tune report's config lists no inputs (\"broadcast\"); tune the pattern again");
    std::string args;
    for (size_t i = 0; i < broadcast.size(); ++i) args += (i ? ", " : "") + s.tensor(fmt::format("in{}", i).c_str(), true);
    std::string call = fmt::format("{}({})", s.op, args);
    // The op returns its full shape (its rows padded), or one value a row with the rows' dims dropped or kept as 1;
    // where the anchor holds the same elements in another shape (a sum over dims of extent 1 drops them: level2/42's
    // [16, 1, 1, 1] -> [16, 1]; a squeeze inside the fragment: level2/55's [128, 1, 16384] -> [128]), the call views it.
    if (generated(s.config) && s.config.at("fragment").value("output", std::string()) == s.match.anchor) {
      const json& fragment = s.config.at("fragment");
      auto shape = fragment.value("full_shape", std::vector<int64_t>{});
      const auto program = discover::lower_row_program(fragment);
      if (!shape.empty() && !program.output_per_row) shape.back() += program.pad_lo + program.pad_hi;
      if (!shape.empty() && program.output_per_row) {
        const int trailing = fragment.value("trailing_dims", 1), inner_dims = fragment.value("inner_dims", 0);
        const auto first = shape.end() - inner_dims - trailing;
        const auto at = shape.erase(first, first + trailing);
        if (s.config.value("keepdim", false)) shape.insert(at, trailing, 1);
      }
      const auto& anchor = s.graph.at(s.match.anchor).out().shape;
      if (!shape.empty() && anchor != shape) call += fmt::format(".view({})", fmt::join(anchor, ", "));
    }
    return {"", call};
  }

 private:
  // A region of discover's generated row-wise pass: the fragment rides in the match's kernel block.
  static json generated_problem(const discover::Match& m, Numerics numerics, Arch arch,
                                const std::string& where) {
    json fragment = field(m.kernel, "fragment", where + ": the kernel block");
    auto program = discover::lower_row_program(fragment);  // refuses, naming the node, what cannot be generated
    json broadcast = json::array();
    bool full = false;
    for (size_t i = 0; i < program.inputs.size(); ++i) {
      bool b = program.inputs[i] != discover::RowInputKind::full;
      full |= !b || program.inputs[i] == discover::RowInputKind::window;  // a pool's input gives the samples too
      broadcast.push_back(b);
      if (!match_operand_bound(m, i)) throw Error(fmt::format("{}: the match binds no tensor for $in{}", where, i));
    }
    if (!full) throw Error(where + ": every input is a shared row; the op takes its row count from a full or pooled input");
    if (static_cast<int>(program.inputs.size()) > kMaxInputs)
      throw Error(fmt::format("{}: {} inputs; the ABI takes at most {}", where, program.inputs.size(), kMaxInputs));
    // The fragment's own output: the anchor's value, or the per-row partials of a whole-tensor reduction after it.
    std::vector<int64_t> out_shape;
    for (const auto& n : fragment.at("nodes"))
      if (n.at("name") == fragment.at("output")) out_shape = n.at("outputs").at(0).at("shape").get<std::vector<int64_t>>();
    const auto full_shape = fragment.value("full_shape", std::vector<int64_t>{program.rows, program.cols});
    return {{"generated", true},
            {"rows", program.rows},
            {"cols", program.cols},
            {"broadcast", broadcast},
            {"dtype", program.dtype},
            {"numerics", to_string(numerics)},
            {"arch", to_string(arch)},
            {"output_per_row", program.output_per_row},
            {"keepdim", program.output_per_row && out_shape.size() == full_shape.size()},
            {"trailing_dims", fragment.value("trailing_dims", 1)},
            {"fragment", fragment}};
  }

  static bool match_operand_bound(const discover::Match& m, size_t i) {
    const json ops = m.kernel.value("operands", json::object());
    std::string key = fmt::format("in{}", i);
    if (!ops.contains(key) || !ops[key].is_string()) return false;
    std::string v = ops[key];
    return m.inputs.count(v) || (!v.empty() && v[0] == '$' && m.inputs.count(v.substr(1)));
  }

  static std::string summary(const json& c) {
    if (generated(c))
      return fmt::format("generated row-wise kernel ({} ops, {} inputs, cols {}, {}; {})", c.at("fragment").at("nodes").size(),
                         c.at("broadcast").size(), c.at("cols").get<int64_t>(), c.at("dtype").get<std::string>(),
                         RowwiseKernelConfig::from_json(c.at("kernel")).text());
    return fmt::format("registered row-wise kernel {} ({} inputs, cols {}, {})", c.at("entry").get<std::string>(),
                       c.at("broadcast").size(), c.at("cols").get<int64_t>(), c.at("dtype").get<std::string>());
  }
};

}  // namespace

const bool registered = register_kernel_family(std::make_unique<RowwiseFamily>());

}  // namespace fact::realize
