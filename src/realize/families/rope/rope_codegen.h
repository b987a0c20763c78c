#pragma once
// Renders rotary-embedding kernels (.cu exporting the FactRopeArgs C ABI) and their PyTorch op wrappers from
// templates/cute/rope_fwd.cu.in and rope_op.cpp.in. Only values come from here.
#include <string>

#include "realize/families/gemm/gemm_codegen.h"
#include "realize/families/rope/rope_config.h"
#include "realize/template_renderer.h"

namespace fact::realize {

TemplateValues rope_kernel_values(const RopeConfig& config);
GeneratedSource generate_rope_kernel(const RopeConfig& config);

// "rope_<id>(Tensor x, Tensor cos, Tensor sin) -> Tensor"
std::string rope_op_schema(const RopeConfig& config);
GeneratedSource generate_rope_op_wrapper(const RopeConfig& config);

}  // namespace fact::realize
