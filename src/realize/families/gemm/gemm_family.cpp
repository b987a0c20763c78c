// The GEMM family behind the KernelFamily seam: linear/addmm/mm/bmm/matmul matches (with their fused
// epilogues) to CUTLASS kernels rendered from templates/cutlass/, ranked by gemm_config_space.
#include <fmt/format.h>

#include "compose/python_expr.h"
#include "core/error.h"
#include "realize/families/gemm/gemm_codegen.h"
#include "realize/families/gemm/gemm_config_space.h"
#include "realize/families/gemm/gemm_workload.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

using nlohmann::json;

std::string layout_letter(MatrixLayout l) { return l == MatrixLayout::row ? "r" : "c"; }

std::string shape_list(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t dim(const discover::Match& m, const char* name, int64_t fallback) {
  auto it = m.dims.find(name);
  return it == m.dims.end() ? fallback : it->second;
}

class GemmFamily final : public KernelFamily {
 public:
  std::string name() const override { return "gemm"; }

  json problem_from_match(const discover::Match& m, const ir::Graph& g, Numerics numerics, Arch arch) const override {
    return gemm_problem_from_match(m, g, numerics, arch).to_json();
  }

  WorkloadKey workload_key(const std::string& pattern, const json& problem) const override {
    GemmProblem p = GemmProblem::from_json(problem);
    return make_workload_key(pattern, p.to_json(), to_string(p.element_in),
                             layout_letter(p.a.layout) + layout_letter(p.b.layout) + layout_letter(p.d.layout),
                             to_string(p.numerics), to_string(p.arch));
  }

  CandidateSet candidates(const json& problem, int top_n) const override {
    GemmSpaceOptions so;
    so.top_n = top_n;
    GemmConfigSpace space = enumerate_gemm_configs(GemmProblem::from_json(problem), so);
    CandidateSet out;
    out.space = fmt::format("config space: {} enumerated, {} kept after pruning and ranking", space.enumerated,
                            space.ranked.size());
    for (auto& rc : space.ranked) {
      try {
        out.ranked.push_back(candidate(rc.config));
      } catch (const Error& e) {
        FamilyCandidate c{rc.config.id(), rc.config.to_json(), rc.config.summary(), rc.config.arch, {}, e.what()};
        out.ranked.push_back(std::move(c));
      }
    }
    return out;
  }

  FamilyCandidate candidate_from_config(const json& config) const override {
    return candidate(GemmConfig::from_json(config));
  }

  json measure_problem(const json& problem) const override {
    GemmProblem p = GemmProblem::from_json(problem);
    auto layout = [](MatrixLayout l) { return l == MatrixLayout::row ? "row" : "col"; };
    json out = {{"m", p.m}, {"n", p.n}, {"k", p.k}, {"batch", p.batch}, {"layout_a", layout(p.a.layout)},
                {"layout_b", layout(p.b.layout)}, {"dtype", to_string(p.element_in)},
                {"numerics", to_string(p.numerics)}, {"epilogue", p.epilogue.to_json()}};
    if (p.b.constant) out["b_constant"] = true;  // timed with B's pre-pass copy kept, as the composed module runs
    return out;
  }

  // 3xTF32 promises fp32 accuracy: no worse than twice cuBLAS fp32's own error against float64.
  std::string accuracy_shortfall(const json& problem, const CandidateRecord& rec,
                                 const TuneOutcome& so_far) const override {
    if (GemmProblem::from_json(problem).numerics != Numerics::x3tf32) return "";
    if (!rec.rel_err || !so_far.fp32_reference_err || *rec.rel_err <= 2.0 * *so_far.fp32_reference_err) return "";
    return fmt::format("rel err {:.2e} is over twice cuBLAS fp32's {:.2e}: not fp32-accurate", *rec.rel_err,
                       *so_far.fp32_reference_err);
  }

  std::string op_name(const std::string& config_id) const override { return "gemm_" + config_id; }

  std::string op_wrapper(const json& config) const override {
    return gemm_op_wrapper_fragment(GemmConfig::from_json(config));
  }

  std::string op_schema(const json& config) const override {
    GemmConfig c = GemmConfig::from_json(config);
    return op_name(c.id()) + gemm_op_schema_arguments(c.epilogue);
  }

  json manifest_fields(const json& config) const override {
    GemmConfig c = GemmConfig::from_json(config);
    json fields = {{"epilogue", c.epilogue.to_json()},
            {"has_bias", has_bias(c.epilogue)},
            {"has_residual", has_residual(c.epilogue)},
            {"element_in", to_string(c.element_in)},
            {"element_out", to_string(c.element_out)},
            {"layout", {{"a", to_string(c.layout_a)}, {"b", to_string(c.layout_b)}, {"d", to_string(c.layout_d)}}}};
    fields.update(epilogue_reference_json(c.epilogue));  // the tree and its activations, for the CPU reference op
    return fields;
  }

  // a folded to [M, K] (or kept [batch, M, K]), b as the wrapper's [K, N] view (a Linear weight [N, K] is passed
  // transposed: a column-major view), the result reshaped back to the anchor's shape.
  OpCall op_call(const OpCallSite& s) const override {
    const discover::Match& m = s.match;
    const ir::Node* a = s.node("a");
    const ir::Node* b = s.node("b");
    if (!a || !b || a->outputs.empty() || b->outputs.empty())
      throw Error(s.where + ": the rule's kernel block names no bound tensors for operands a and b; fix the rule file");
    if (!m.extra_outputs.empty())
      throw Error(fmt::format("{}: a GEMM op returns one tensor, but the match exports {} more; fix the rule's "
                              "extra_outputs", s.where, m.extra_outputs.size()));
    const ir::Node* bias = s.node("bias");
    const ir::Node* residual = s.node("residual");
    const auto& anchor = s.graph.at(m.anchor).out();
    int64_t n = dim(m, "N", anchor.shape.back());
    int64_t k = dim(m, "K", a->out().shape.back());
    int64_t mm = dim(m, "M", anchor.numel() / std::max<int64_t>(n, 1));
    int64_t batch = dim(m, "batch", 1);
    const json& epilogue_json = s.problem.is_object() && s.problem.contains("epilogue") ? s.problem["epilogue"]
                                : s.config.value("epilogue", json("none"));
    Epilogue epilogue = Epilogue::from_json(epilogue_json);

    std::string a_expr = s.tensor("a", true);
    if (batch == 1 && a->out().rank() != 2) a_expr += fmt::format(".reshape({}, {})", mm, k);
    std::string b_layout = m.attrs.count("b_layout") ? m.attrs.at("b_layout").get<std::string>() : "kn";
    std::string b_expr = s.tensor("b", true) + (b_layout == "nk" ? ".t()" : "");
    // A weight's pre-pass copy (3xTF32 split, K-major TF32 copy) is made once and kept by the op.
    std::string b_constant = ir::is_module_state(s.graph, *b) ? ", b_constant=True" : "";
    std::string bias_expr = "None";
    if (bias) bias_expr = s.tensor("bias", true) + (bias->out().rank() == 1 ? "" : fmt::format(".reshape({})", n));
    else if (has_bias(epilogue)) bias_expr = fmt::format("{}.new_zeros({})", s.tensor("a", true), n);  // the epilogue reads a bias
    std::string residual_expr = "None";
    OpCall call;
    if (s.node("up_b")) {
      // SwiGLU: the up projection runs first as PyTorch's GEMM (what a Linear runs), and its result U rides in
      // the residual slot, where the kernel's epilogue multiplies silu(gate) by it.
      const ir::Node* up_bias = s.node("up_bias");
      std::string up_b_expr = s.tensor("up_b", true) + (b_layout == "nk" ? ".t()" : "");
      std::string up = up_bias ? fmt::format("torch.addmm({}, {}, {})", s.tensor("up_bias", true) +
                                                 (up_bias->out().rank() == 1 ? "" : fmt::format(".reshape({})", n)),
                                             a_expr, up_b_expr)
                               : fmt::format("torch.mm({}, {})", a_expr, up_b_expr);
      call.prelude = fmt::format("{}_up = {}  # SwiGLU up projection (PyTorch GEMM), multiplied in by the epilogue", s.out, up);
      residual_expr = s.out + "_up";
    } else if (residual) {
      std::string r = s.tensor("residual", true);
      residual_expr = batch == 1 ? fmt::format("{}.reshape({}, {}).contiguous()", r, mm, n)
                                 : fmt::format("{}.reshape({}, {}, {}).contiguous()", r, batch, mm, n);
    }
    // The epilogue's vec<i> slots, in slot order, flattened: module parameters and buffers are read live (a
    // contiguous tensor's reshape(-1) is a view, never a copy).
    std::string vectors_expr;
    for (int i : epilogue.tree.vector_slots()) {
      std::string slot = fmt::format("vec{}", i);
      vectors_expr += (vectors_expr.empty() ? "" : ", ") + s.tensor(slot.c_str(), true) + ".reshape(-1)";
    }
    if (!vectors_expr.empty()) vectors_expr = ", [" + vectors_expr + "]";
    std::vector<int64_t> produced = batch == 1 ? std::vector<int64_t>{mm, n} : std::vector<int64_t>{batch, mm, n};
    std::string reshape = produced == anchor.shape ? "" : fmt::format(".reshape({})", shape_list(anchor.shape));
    call.expression = fmt::format("{}({}, {}, {}, {}{}{}){}", s.op, a_expr, b_expr, bias_expr, residual_expr,
                                  vectors_expr, b_constant, reshape);
    return call;
  }

 private:
  static FamilyCandidate candidate(const GemmConfig& c) {
    return {c.id(), c.to_json(), c.summary(), c.arch, generate_gemm_kernel(c), "", c.run_time_arguments()};
  }
};

}  // namespace

const bool registered = register_kernel_family(std::make_unique<GemmFamily>());

}  // namespace fact::realize
