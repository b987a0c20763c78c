#pragma once
// Renders normalization kernels (.cu exporting the FactNormArgs C ABI) and their PyTorch op wrappers
// from templates/cute/norm_fwd.cu.in and norm_op.cpp.in. Only values come from here.
#include <string>

#include "realize/families/gemm/gemm_codegen.h"
#include "realize/families/normalization/norm_config.h"
#include "realize/template_renderer.h"

namespace fact::realize {

TemplateValues norm_kernel_values(const NormConfig& config);
GeneratedSource generate_norm_kernel(const NormConfig& config);

// "norm_<id>(Tensor x, Tensor? residual, Tensor? weight, Tensor? bias, float eps) -> Tensor"
// (-> (Tensor, Tensor) when the config also writes x + residual).
std::string norm_op_schema(const NormConfig& config);
GeneratedSource generate_norm_op_wrapper(const NormConfig& config);

}  // namespace fact::realize
