#pragma once
// Renders attention kernels from the config's kernel template (templates/cute/attention_fwd.cu.in for
// sm80_mma, attention_fwd_sm90.cu.in for sm90_wgmma, attention_fwd_sm90_ws.cu.in for sm90_tma_ws; all three have
// the slots config_id, summary, element, numerics, head_dim, block_m, block_n, warps, config_json and export
// fact_<id>_can_implement/_run/_describe taking const FactAttentionArgs*) and their op wrappers (one wrapper
// template for all).
#include <string>

#include "realize/families/attention/attention_config.h"
#include "realize/families/gemm/gemm_codegen.h"
#include "realize/template_renderer.h"

namespace fact::realize {

TemplateValues attention_kernel_values(const AttentionConfig& config);
// Renders the family's template; throws Error naming the missing file when it is not in this tree.
GeneratedSource generate_attention_kernel(const AttentionConfig& config);
// The same from a template text (tests render a stand-in with the real slot set).
GeneratedSource render_attention_kernel(const AttentionConfig& config, const std::string& template_text,
                                        const std::string& what);

// "attn_<id>(Tensor q, Tensor k, Tensor v, float scale, bool causal) -> Tensor": O as the transpose(1, 2)
// view of a [batch, seq_q, heads, head_dim] tensor.
std::string attention_op_schema(const AttentionConfig& config);
GeneratedSource generate_attention_op_wrapper(const AttentionConfig& config);

}  // namespace fact::realize
