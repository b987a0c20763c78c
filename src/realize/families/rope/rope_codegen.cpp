#include "realize/families/rope/rope_codegen.h"

#include <fmt/format.h>

#include "core/error.h"
#include "realize/kernel_family.h"

namespace fact::realize {

TemplateValues rope_kernel_values(const RopeConfig& c) {
  return {{"config_id", c.id()},
          {"summary", c.summary()},
          {"config_json", c.to_json().dump()},
          {"element", cutlass_type(c.element)},
          {"head_dim", std::to_string(c.head_dim)},
          {"threads_per_cta", std::to_string(c.threads_per_cta)},
          {"vector_elems", std::to_string(c.vector_elems)},
          {"items_per_thread", std::to_string(c.items_per_thread)}};
}

GeneratedSource generate_rope_kernel(const RopeConfig& c) {
  if (c.head_dim < 2 || c.head_dim % 2 || c.vector_elems < 1 || (c.head_dim / 2) % c.vector_elems ||
      c.vector_elems * element_bytes(c.element) > 16 || c.threads_per_cta % 32 || c.threads_per_cta > 1024 ||
      c.items_per_thread < 1)
    throw Error(fmt::format("rope config {} ({}): head_dim must be even with halves of whole vectors of at most 16 "
                            "bytes, whole warps of at most 1024 threads, at least one pair per thread",
                            c.id(), c.summary()));
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = family_template("rope", "kernel_template");
  out.text = render_template_file(out.template_name, rope_kernel_values(c));
  return out;
}

std::string rope_op_schema(const RopeConfig& c) { return c.id() + "(Tensor x, Tensor cos, Tensor sin) -> Tensor"; }

GeneratedSource generate_rope_op_wrapper(const RopeConfig& c) {
  GeneratedSource out;
  out.config_id = c.id();
  out.template_name = family_template("rope", "op_template");
  out.text = render_template_file(out.template_name, {{"config_id", c.id()},
                                                      {"summary", c.summary()},
                                                      {"torch_dtype", torch_scalar_type(c.element)},
                                                      {"dtype", to_string(c.element)},
                                                      {"head_dim", std::to_string(c.head_dim)},
                                                      {"vector_elems", std::to_string(c.vector_elems)},
                                                      {"schema", rope_op_schema(c)}});
  return out;
}

}  // namespace fact::realize
