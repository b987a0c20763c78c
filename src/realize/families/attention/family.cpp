// The attention family behind the KernelFamily seam: sdpa_attention / sdpa_attention_manual matches to kernels
// rendered from the config's kernel template (templates/cute/attention_fwd*.cu.in) and op wrappers from
// templates/cute/attention_op.cpp.in (only the values come from here), and the composed module's call of the op.
#include <filesystem>

#include <fmt/format.h>

#include "compose/python_expr.h"
#include "core/error.h"
#include "core/paths.h"
#include "realize/families/attention/family.h"
#include "realize/family_codegen.h"
#include "realize/typed_kernel_family.h"

namespace fact::realize {
namespace {

TemplateValues attention_kernel_values(const AttentionConfig& c) {
  TemplateValues v = kernel_slots(c, {"numerics", "head_dim", "block_m", "block_n", "warps"});
  v["element"] = cutlass_type(c.element);
  if (c.kernel == AttentionKernel::sm90_tma_ws) v["schedule"] = to_string(c.schedule);  // its template alone has the axis
  v["attention_mask"] = render_template_file("cute/attention_mask.cuh.in", {});
  return v;
}

}  // namespace

GeneratedSource render_attention_kernel(const AttentionConfig& c, const std::string& text, const std::string& what) {
  return {c.id(), what, render_template(text, attention_kernel_values(c), what)};
}

GeneratedSource generate_attention_kernel(const AttentionConfig& c) {
  const std::string name = c.template_name();
  if (!std::filesystem::exists(templates_dir() / name))
    throw Error("attention kernel template " + (templates_dir() / name).string() +
                " is not in this tree yet; PyTorch keeps attention until it lands");
  return {c.id(), name, render_template_file(name, attention_kernel_values(c))};
}

std::string attention_op_schema(const AttentionConfig& c) {
  return c.id() + "(Tensor q, Tensor k, Tensor v, Tensor? mask, float scale, bool causal) -> Tensor";
}

GeneratedSource generate_attention_op_wrapper(const AttentionConfig& c) {
  return render_family_template("attention", "op_template", c.id(),
                                op_wrapper_slots(c, attention_op_schema(c), {"head_dim"}));
}

namespace {

// q, k, v as the module's views (read in place through their strides; for grouped-query attention the rule
// binds K/V before their expand, so heads_kv < heads), the module's mask or None. O is the [B, H, T, D] view of a
// [B, T, H, D] tensor, so the module's following transpose(1, 2).contiguous() copies nothing.
OpCall attention_op_call(const OpCallSite& s) {
  return {"", fmt::format("{}({}, {}, {}, {}, {}, {})", s.op, s.tensor("q", true), s.tensor("k", true),
                          s.tensor("v", true), s.tensor("mask", false),
                          compose::python_float(s.scalar("scale", false).get<double>()),
                          s.scalar("causal", true).get<bool>() ? "True" : "False")};
}

const bool registered = register_typed_family<AttentionProblem, AttentionConfig>(
    {.name = "attention", .workload_layout = "bhsd", .problem_from_match = attention_problem_from_match,
     .config_space = enumerate_attention_configs, .kernel = generate_attention_kernel,
     .op_schema = attention_op_schema, .op_wrapper = generate_attention_op_wrapper, .op_call = attention_op_call});

}  // namespace
}  // namespace fact::realize
