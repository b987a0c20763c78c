// The normalization family behind the KernelFamily seam: LayerNorm and RMSNorm (optionally after a residual
// add) to kernels and op wrappers rendered from templates/cute/norm_fwd.cu.in and norm_op.cpp.in (only the
// values come from here), and the composed module's call of the op.
#include <fmt/format.h>

#include "compose/python_expr.h"
#include "core/error.h"
#include "realize/families/normalization/family.h"
#include "realize/family_codegen.h"
#include "realize/typed_kernel_family.h"

namespace fact::realize {

GeneratedSource generate_norm_kernel(const NormConfig& c) {
  if (c.kind == NormKind::rms_norm && c.has_bias)
    throw Error("normalization config " + c.id() + ": RMSNorm takes no bias");
  if (c.store_sum && !c.has_residual)
    throw Error("normalization config " + c.id() + ": store_sum needs a residual");
  if (c.threads_per_row % 32 || c.threads_per_cta() > 1024 || c.vectors_per_thread < 1 ||
      c.vector_elems * element_bytes(c.element) > 16)
    throw Error(fmt::format("normalization config {} ({}): threads per row must be whole warps, at most 1024 "
                            "threads per CTA, vectors of at most 16 bytes", c.id(), c.summary()));
  TemplateValues v = kernel_slots(c, {"has_weight", "has_bias", "has_residual", "store_sum", "threads_per_row",
                                      "rows_per_cta", "vector_elems", "vectors_per_thread"});
  v["element"] = cutlass_type(c.element);
  v["layer_norm"] = c.kind == NormKind::layer_norm ? "true" : "false";
  return render_family_template("normalization", "kernel_template", c.id(), v);
}

std::string norm_op_schema(const NormConfig& c) {
  return fmt::format("{}(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> {}", c.id(),
                     c.store_sum ? "(Tensor, Tensor)" : "Tensor");
}

GeneratedSource generate_norm_op_wrapper(const NormConfig& c) {
  TemplateValues v =
      op_wrapper_slots(c, norm_op_schema(c), {"has_residual", "has_weight", "has_bias", "store_sum", "vector_elems"});
  v["max_cols"] = std::to_string(c.max_cols());
  v["return_type"] = c.store_sum ? "std::tuple<at::Tensor, at::Tensor>" : "at::Tensor";
  v["return_value"] = c.store_sum ? "std::make_tuple(y, sum)" : "y";
  return render_family_template("normalization", "op_template", c.id(), v);
}

namespace {

// (x, residual, weight, bias, eps); a config that also writes x + residual returns (y, sum), y the anchor.
OpCall norm_op_call(const OpCallSite& s) {
  return {"", fmt::format("{}({}, {}, {}, {}, {})", s.op, s.tensor("x", true), s.tensor("residual", false),
                          s.tensor("weight", false), s.tensor("bias", false),
                          compose::python_float(s.scalar("eps", false).get<double>()))};
}

std::vector<std::string> norm_op_returns(const nlohmann::json& config) {
  if (config.is_object() && config.value("store_sum", false)) return {"y", "sum"};
  return {"anchor"};
}

const bool registered = register_typed_family<NormProblem, NormConfig>(
    {.name = "normalization", .workload_layout = "row", .problem_from_match = norm_problem_from_match,
     .config_space = enumerate_norm_configs, .kernel = generate_norm_kernel, .op_schema = norm_op_schema,
     .op_wrapper = generate_norm_op_wrapper, .op_call = norm_op_call, .op_returns = norm_op_returns});

}  // namespace
}  // namespace fact::realize
