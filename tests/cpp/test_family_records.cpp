// Tuning records are found by workload key and name their kernels by config id; the op library and the
// measuring worker read the manifest fields and the measure problem. A change to any of them (or to the JSON
// they are made of) would orphan every record, so each row pins what the KernelFamily seam makes of one problem
// and one config to the values written by the code that wrote the records (before the families moved into
// one folder each). The rows are ranked-first configs of the matches in tests/cpp/data/ir.
#include <gtest/gtest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "realize/kernel_family.h"

using fact::realize::KernelFamily;
using nlohmann::json;

namespace {

struct RecordedRow {
  const char* family;
  const char* pattern;
  const char* problem;   // as the family writes it (the workload key's shape)
  const char* config;    // as the family writes it (what the config id hashes)
  const char* seam;      // what the seam makes of them, see seam_view
};

const RecordedRow kRecorded[] = {
    {"rope", "rope",  // llama3_block.json rope 3xtf32/sm80
     R"({"arch":"sm80","batch":2,"cos_strides":[0,0,128],"element":"float32","head_dim":128,"heads":32,)"
     R"("numerics":"fp32","out_strides":[8388608,128,4096],"seq":2048,"sin_strides":[0,0,128],)"
     R"("x_strides":[8388608,128,4096]})",
     R"({"arch":"sm80","element":"float32","family":"rope","head_dim":128,"items_per_thread":2,)"
     R"("kind":"half_split","threads_per_cta":256,"vector_elems":4})",
     R"({"best":"rope_7441e89324e0","config_id":"rope_7441e89324e0","key":["float32","bhsd","fp32","sm80"],)"
     R"("manifest":{"element":"float32"},"measure":{"batch":2,"cos_strides":[0,0,128],"dtype":"float32",)"
     R"("head_dim":128,"heads":32,"numerics":"fp32","out_strides":[8388608,128,4096],"seq":2048,)"
     R"("sin_strides":[0,0,128],"x_strides":[8388608,128,4096]},"op_name":"rope_7441e89324e0",)"
     R"("returns":["anchor"],"space":"rope config space: 27 candidates kept after pruning and ranking"})"},
    {"normalization", "layer_norm",  // add_layer_norm.json layer_norm 3xtf32/sm80
     R"({"arch":"sm80","cols":1024,"element":"float32","eps":1e-05,"has_bias":true,"has_residual":false,)"
     R"("has_weight":true,"kind":"layer_norm","numerics":"fp32","residual_row_stride":0,"rows":16384,)"
     R"("store_sum":false,"x_row_stride":1024})",
     R"({"arch":"sm80","element":"float32","family":"normalization","has_bias":true,"has_residual":false,)"
     R"("has_weight":true,"kind":"layer_norm","rows_per_cta":4,"store_sum":false,"threads_per_row":32,)"
     R"("vector_elems":4,"vectors_per_thread":8})",
     R"({"best":"norm_734bcd908aab","config_id":"norm_734bcd908aab","key":["float32","row","fp32","sm80"],)"
     R"("manifest":{"element":"float32"},"measure":{"cols":1024,"dtype":"float32","eps":1e-05,)"
     R"("has_bias":true,"has_residual":false,"has_weight":true,"kind":"layer_norm","numerics":"fp32",)"
     R"("residual_row_stride":0,"rows":16384,"store_sum":false,"x_row_stride":1024},)"
     R"("op_name":"norm_734bcd908aab","returns":["anchor"],)"
     R"("space":"normalization config space: 47 candidates kept after pruning and ranking"})"},
    {"normalization", "add_layer_norm",  // minigpt_block.json add_layer_norm bf16/sm90
     R"({"arch":"sm90","cols":768,"element":"bfloat16","eps":1e-05,"has_bias":true,"has_residual":true,)"
     R"("has_weight":true,"kind":"layer_norm","numerics":"bf16","residual_row_stride":768,"rows":65536,)"
     R"("store_sum":true,"x_row_stride":768})",
     R"({"arch":"sm90","element":"bfloat16","family":"normalization","has_bias":true,"has_residual":true,)"
     R"("has_weight":true,"kind":"layer_norm","rows_per_cta":4,"store_sum":true,"threads_per_row":32,)"
     R"("vector_elems":8,"vectors_per_thread":3})",
     R"({"best":"norm_e0a6d385aa01","config_id":"norm_e0a6d385aa01","key":["bfloat16","row","bf16","sm90"],)"
     R"("manifest":{"element":"bfloat16"},"measure":{"cols":768,"dtype":"bfloat16","eps":1e-05,)"
     R"("has_bias":true,"has_residual":true,"has_weight":true,"kind":"layer_norm","numerics":"bf16",)"
     R"("residual_row_stride":768,"rows":65536,"store_sum":true,"x_row_stride":768},)"
     R"("op_name":"norm_e0a6d385aa01","returns":["y","sum"],)"
     R"("space":"normalization config space: 48 candidates kept after pruning and ranking"})"},
    {"attention", "sdpa_attention",  // encoder_block_postnorm.json sdpa_attention 3xtf32/sm80
     R"({"arch":"sm80","batch":16,"causal":false,"element":"float32","head_dim":64,"heads":12,"heads_kv":12,)"
     R"("k_strides":[884736,64,2304],"numerics":"3xtf32","q_strides":[884736,64,2304],"scale":0.125,)"
     R"("seq_k":384,"seq_q":384,"v_strides":[884736,64,2304]})",
     R"({"arch":"sm80","block_m":128,"block_n":32,"element":"float32","family":"attention","head_dim":64,)"
     R"("kernel":"sm80_mma","numerics":"3xtf32","warps":8})",
     R"({"best":"attn_016060f71db2","config_id":"attn_016060f71db2","key":["float32","bhsd","3xtf32",)"
     R"("sm80"],"manifest":{"element":"float32"},"measure":{"batch":16,"causal":false,"dtype":"float32",)"
     R"("head_dim":64,"heads":12,"heads_kv":12,"k_strides":[884736,64,2304],"numerics":"3xtf32",)"
     R"("q_strides":[884736,64,2304],"scale":0.125,"seq_k":384,"seq_q":384,"v_strides":[884736,64,2304]},)"
     R"("op_name":"attn_016060f71db2","returns":["anchor"],)"
     R"("space":"attention config space: 9 candidates kept after pruning and ranking"})"},
    {"attention", "sdpa_attention",  // llama3_block.json sdpa_attention bf16/sm90
     R"({"arch":"sm90","batch":2,"causal":true,"element":"bfloat16","head_dim":128,"heads":32,"heads_kv":8,)"
     R"("k_strides":[2097152,128,1024],"numerics":"bf16","q_strides":[8388608,128,4096],)"
     R"("scale":0.08838834764831843,"seq_k":2048,"seq_q":2048,"v_strides":[2097152,128,1024]})",
     R"({"arch":"sm90","block_m":128,"block_n":64,"element":"bfloat16","family":"attention","head_dim":128,)"
     R"("kernel":"sm90_tma_ws","numerics":"bf16","warps":8})",
     R"({"best":"attn_81dcf3c27ca1","config_id":"attn_81dcf3c27ca1","key":["bfloat16","bhsd","bf16","sm90"],)"
     R"("manifest":{"element":"bfloat16"},"measure":{"batch":2,"causal":true,"dtype":"bfloat16",)"
     R"("head_dim":128,"heads":32,"heads_kv":8,"k_strides":[2097152,128,1024],"numerics":"bf16",)"
     R"("q_strides":[8388608,128,4096],"scale":0.08838834764831843,"seq_k":2048,"seq_q":2048,)"
     R"("v_strides":[2097152,128,1024]},"op_name":"attn_81dcf3c27ca1","returns":["anchor"],)"
     R"("space":"attention config space: 19 candidates kept after pruning and ranking"})"},
};

json seam_view(const KernelFamily& f, const RecordedRow& row) {
  const json problem = json::parse(row.problem), config = json::parse(row.config);
  const fact::WorkloadKey key = f.workload_key(row.pattern, problem);
  const auto candidate = f.candidate_from_config(config);
  const auto space = f.candidates(problem, 100);
  EXPECT_EQ(key.shape.dump(), row.problem) << row.family;
  EXPECT_EQ(candidate.config.dump(), row.config) << row.family;
  EXPECT_EQ(key.pattern, row.pattern);
  return {{"config_id", candidate.config_id},
          {"key", {key.dtype, key.layout, key.numerics, key.arch}},
          {"op_name", f.op_name(candidate.config_id)},
          {"manifest", f.manifest_fields(config)},
          {"returns", f.op_returns(config)},
          {"measure", f.measure_problem(problem)},
          {"space", space.space},
          {"best", space.ranked.empty() ? std::string() : space.ranked.front().config_id}};
}

}  // namespace

TEST(KernelFamilySeam, RecordKeysStayAsRecorded) {
  for (const auto& row : kRecorded) {
    const KernelFamily* f = fact::realize::kernel_family_named(row.family);
    ASSERT_NE(f, nullptr) << row.family;
    EXPECT_EQ(seam_view(*f, row), json::parse(row.seam)) << row.family << " " << row.problem;
  }
}
