// The rope family behind the KernelFamily seam: rope matches (x * cos + rotate_half(x) * sin) to kernels and
// op wrappers rendered from templates/cute/rope_fwd.cu.in and rope_op.cpp.in (only the values come from here),
// and the composed module's call of the op.
#include <fmt/format.h>

#include "core/error.h"
#include "realize/families/rope/family.h"
#include "realize/family_codegen.h"
#include "realize/typed_kernel_family.h"

namespace fact::realize {

GeneratedSource generate_rope_kernel(const RopeConfig& c) {
  if (c.head_dim < 2 || c.head_dim % 2 || c.vector_elems < 1 || (c.head_dim / 2) % c.vector_elems ||
      c.vector_elems * element_bytes(c.element) > 16 || c.threads_per_cta % 32 || c.threads_per_cta > 1024 ||
      c.items_per_thread < 1)
    throw Error(fmt::format("rope config {} ({}): head_dim must be even with halves of whole vectors of at most 16 "
                            "bytes, whole warps of at most 1024 threads, at least one pair per thread",
                            c.id(), c.summary()));
  TemplateValues v = kernel_slots(c, {"head_dim", "threads_per_cta", "vector_elems", "items_per_thread"});
  v["element"] = cutlass_type(c.element);
  return render_family_template("rope", "kernel_template", c.id(), v);
}

std::string rope_op_schema(const RopeConfig& c) { return c.id() + "(Tensor x, Tensor cos, Tensor sin) -> Tensor"; }

GeneratedSource generate_rope_op_wrapper(const RopeConfig& c) {
  return render_family_template("rope", "op_template", c.id(),
                                op_wrapper_slots(c, rope_op_schema(c), {"head_dim", "vector_elems"}));
}

namespace {

// x as the module's view (read in place through its strides), cos/sin as the module's [seq, D] tables; the
// result has x's shape in the layout PyTorch's elementwise ops give (x's dim order), as the anchor had.
OpCall rope_op_call(const OpCallSite& s) {
  return {"", fmt::format("{}({}, {}, {})", s.op, s.tensor("x", true), s.tensor("cos", true), s.tensor("sin", true))};
}

const bool registered = register_typed_family<RopeProblem, RopeConfig>(
    {.name = "rope", .workload_layout = "bhsd", .problem_from_match = rope_problem_from_match,
     .config_space = enumerate_rope_configs, .kernel = generate_rope_kernel, .op_schema = rope_op_schema,
     .op_wrapper = generate_rope_op_wrapper, .op_call = rope_op_call});

}  // namespace
}  // namespace fact::realize
