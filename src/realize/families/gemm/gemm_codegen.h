#pragma once
// Renders GEMM kernels (.cu exporting the kernel_abi.h C ABI) and their PyTorch op wrapper (.cpp)
// from the template files in templates/cutlass/. Only the values come from here; the code is in the templates.
#include <string>
#include <vector>

#include "realize/families/gemm/gemm_config.h"
#include "realize/template_renderer.h"

namespace fact::realize {

// The kernel template a config renders from.
std::string gemm_kernel_template(const GemmConfig& config);
// The slot values for that template (exposed so tests can check them without rendering).
TemplateValues gemm_kernel_values(const GemmConfig& config);
// Throws Error when the config is one CUTLASS would reject (checked against a large aligned problem of
// the config's own layouts), so a bad config fails here with a reason rather than in nvcc.
GeneratedSource generate_gemm_kernel(const GemmConfig& config);

// One C++ file defining fact::gemm_<id> (schema: gemm_op_schema_arguments) for each config, with CUDA and Meta
// implementations.
GeneratedSource generate_gemm_op_wrapper(const std::vector<GemmConfig>& configs);
// The op's schema after its name: "(Tensor a, Tensor b, Tensor? bias, Tensor? residual[, Tensor[] vectors],
// *, bool b_constant=False) -> Tensor": vectors are the vec<i> slots the epilogue reads (slot order, each flattened
// contiguous); b_constant marks b as a module parameter or buffer, whose pre-pass copy the op may keep.
std::string gemm_op_schema_arguments(const Epilogue& epilogue);
// One GEMM op's wrapper code (templates/cutlass/op_wrapper_op.cpp.in), without the file's preamble.
std::string gemm_op_wrapper_fragment(const GemmConfig& config);
// The op library's ops.cpp: the preamble of templates/cutlass/op_wrapper.cpp.in (torch includes, kernel_abi.h,
// shared helpers), then each op's wrapper code (GEMM fragments, or a KernelFamily's op_wrapper text).
GeneratedSource op_library_source(const std::vector<std::string>& op_fragments);

}  // namespace fact::realize
