#include "realize/families/normalization/norm_codegen.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::realize {
namespace {

std::string boolean(bool b) { return b ? "true" : "false"; }

}  // namespace

TemplateValues norm_kernel_values(const NormConfig& c) {
  return {{"config_id", c.id()},
          {"summary", c.summary()},
          {"config_json", c.to_json().dump()},
          {"element", cutlass_type(c.element)},
          {"layer_norm", boolean(c.kind == NormKind::layer_norm)},
          {"has_weight", boolean(c.has_weight)},
          {"has_bias", boolean(c.has_bias)},
          {"has_residual", boolean(c.has_residual)},
          {"store_sum", boolean(c.store_sum)},
          {"threads_per_row", std::to_string(c.threads_per_row)},
          {"rows_per_cta", std::to_string(c.rows_per_cta)},
          {"vector_elems", std::to_string(c.vector_elems)},
          {"vectors_per_thread", std::to_string(c.vectors_per_thread)}};
}

GeneratedSource generate_norm_kernel(const NormConfig& c) {
  if (c.kind == NormKind::rms_norm && c.has_bias)
    throw Error("normalization config " + c.id() + ": RMSNorm takes no bias");
  if (c.store_sum && !c.has_residual)
    throw Error("normalization config " + c.id() + ": store_sum needs a residual");
  if (c.threads_per_row % 32 || c.threads_per_cta() > 1024 || c.vectors_per_thread < 1 ||
      c.vector_elems * element_bytes(c.element) > 16)
    throw Error(fmt::format("normalization config {} ({}): threads per row must be whole warps, at most 1024 "
                            "threads per CTA, vectors of at most 16 bytes", c.id(), c.summary()));
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = family_template("normalization", "kernel_template");
  out.text = render_template_file(out.template_name, norm_kernel_values(c));
  return out;
}

std::string norm_op_schema(const NormConfig& c) {
  return fmt::format("{}(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> {}", c.id(),
                     c.store_sum ? "(Tensor, Tensor)" : "Tensor");
}

GeneratedSource generate_norm_op_wrapper(const NormConfig& c) {
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = family_template("normalization", "op_template");
  out.text = render_template_file(
      out.template_name,
      {{"config_id", c.id()},
       {"summary", c.summary()},
       {"torch_dtype", torch_scalar_type(c.element)},
       {"dtype", to_string(c.element)},
       {"has_residual", boolean(c.has_residual)},
       {"has_weight", boolean(c.has_weight)},
       {"has_bias", boolean(c.has_bias)},
       {"store_sum", boolean(c.store_sum)},
       {"vector_elems", std::to_string(c.vector_elems)},
       {"max_cols", std::to_string(c.max_cols())},
       {"return_type", c.store_sum ? "std::tuple<at::Tensor, at::Tensor>" : "at::Tensor"},
       {"return_value", c.store_sum ? "std::make_tuple(y, sum)" : "y"},
       {"schema", norm_op_schema(c)}});
  return out;
}

}  // namespace fact::realize
