/* The C ABI every generated kernel (GEMM family, attention, normalization, rope) exports, so the tuner can load a candidate library
 * with ctypes (no torch headers in the hot compile) and the composer can wrap winners as torch ops.
 * Included by generated .cu files and mirrored by python/fact/realize/kernel_abi.py. Keep in sync. */
#ifndef FACT_KERNEL_ABI_H
#define FACT_KERNEL_ABI_H
#include <stddef.h>
#include <stdint.h>

#define FACT_KERNEL_ABI_VERSION 1

/* D[b] = epilogue(alpha * A[b] @ B[b] + beta * C[b]), with bias[N] and residual (shaped like D)
 * applied by kernels whose epilogue has them. A is MxK, B is KxN, D is MxN; each operand's layout
 * (row- or column-major) is fixed by the kernel's config and ld* is its leading dimension in
 * elements. Batch strides are in elements (0 for an operand shared across the batch). */
typedef struct FactGemmArgs {
  int64_t m, n, k, batch;
  const void* a; int64_t lda; int64_t batch_stride_a;
  const void* b; int64_t ldb; int64_t batch_stride_b;
  const void* c; int64_t ldc; int64_t batch_stride_c; /* source for beta; may be null when beta == 0 */
  void* d;       int64_t ldd; int64_t batch_stride_d;
  const void* bias;      /* [N], or null */
  const void* residual;  /* like D (ldd, batch_stride_d), or null */
  float alpha, beta;
  void* workspace; size_t workspace_bytes;
  void* stream;          /* cudaStream_t */
} FactGemmArgs;

/* Exported by each kernel, with <id> its config id:
 *   int         fact_<id>_can_implement(const FactGemmArgs*);  0 = yes, else a reason code below
 *   size_t      fact_<id>_workspace_bytes(const FactGemmArgs*);
 *   int         fact_<id>_run(const FactGemmArgs*);            0 = launched, else a reason code
 *   const char* fact_<id>_describe(void);                      JSON of the config
 */
/* Forward attention O = softmax(scale * Q K^T [causal mask]) V for one (batch, head) per grid slice.
 * Q is [batch, heads, seq_q, head_dim], K and V [batch, heads_kv, seq_k, head_dim], O like Q; every
 * tensor is given by element strides (the last dimension is contiguous), so the views a module makes
 * with view/transpose (e.g. q = qkv.split(C)[0].view(B, T, H, D).transpose(1, 2)) are read in place.
 * heads % heads_kv == 0 (grouped-query attention shares a K/V head among heads / heads_kv heads).
 * causal: key j is masked for query i when j > i + (seq_k - seq_q) (bottom-right aligned). */
typedef struct FactAttentionArgs {
  int64_t batch, heads, heads_kv, seq_q, seq_k, head_dim;
  const void* q; int64_t q_batch_stride, q_head_stride, q_row_stride;
  const void* k; int64_t k_batch_stride, k_head_stride, k_row_stride;
  const void* v; int64_t v_batch_stride, v_head_stride, v_row_stride;
  void* o;       int64_t o_batch_stride, o_head_stride, o_row_stride;
  float scale;
  int causal;
  void* stream;          /* cudaStream_t */
} FactAttentionArgs;

/* Exported by each attention kernel, with <id> its config id (no workspace):
 *   int         fact_<id>_can_implement(const FactAttentionArgs*);
 *   int         fact_<id>_run(const FactAttentionArgs*);
 *   const char* fact_<id>_describe(void);
 */

/* Row normalization over the last dimension, rows x cols, fp32 accumulation:
 *   s = x + residual (rounded to the element type, as PyTorch's add would), or x when residual is null;
 *   layer_norm: y = (s - mean(s)) / sqrt(var(s) + eps) * weight + bias   (biased variance)
 *   rms_norm:   y = s / sqrt(mean(s^2) + eps) * weight
 * Which norm, and whether weight/bias/residual are present, is fixed by the kernel's config; pointers
 * the config does not use must be null. Rows are given by element strides (the last dim is contiguous).
 * sum, when non-null, receives s (the residual stream a following op reads). */
typedef struct FactNormArgs {
  int64_t rows, cols;
  const void* x;        int64_t x_row_stride;
  const void* residual; int64_t residual_row_stride;
  const void* weight;   /* [cols], or null */
  const void* bias;     /* [cols], or null */
  void* y;              int64_t y_row_stride;
  void* sum;            int64_t sum_row_stride;
  float eps;
  void* stream;         /* cudaStream_t */
} FactNormArgs;

/* Exported by each normalization kernel, with <id> its config id (no workspace):
 *   int         fact_<id>_can_implement(const FactNormArgs*);
 *   int         fact_<id>_run(const FactNormArgs*);
 *   const char* fact_<id>_describe(void);
 */

/* Rotary position embedding, half-split (GPT-NeoX / Llama) form, over x [batch, heads, seq, head_dim]:
 *   out[b, h, t, i] = x[i] * cos[b, h, t, i] - x[i + D/2] * sin[b, h, t, i]   for i <  D/2
 *   out[b, h, t, i] = x[i] * cos[b, h, t, i] + x[i - D/2] * sin[b, h, t, i]   for i >= D/2
 * (x * cos + rotate_half(x) * sin with rotate_half(x) = cat(-x[D/2:], x[:D/2])), computed in fp32.
 * Every tensor is given by element strides for batch, head and row (the last dim is contiguous); cos and
 * sin broadcast over a dim with stride 0 (a [seq, head_dim] table has batch and head strides 0), and x is
 * read in place through the module's view (e.g. a projection's [B, T, H, D] seen as [B, H, T, D]). */
typedef struct FactRopeArgs {
  int64_t batch, heads, seq, head_dim;
  const void* x;   int64_t x_batch_stride, x_head_stride, x_row_stride;
  const void* cos; int64_t cos_batch_stride, cos_head_stride, cos_row_stride;
  const void* sin; int64_t sin_batch_stride, sin_head_stride, sin_row_stride;
  void* out;       int64_t out_batch_stride, out_head_stride, out_row_stride;
  void* stream;    /* cudaStream_t */
} FactRopeArgs;

/* Exported by each rope kernel, with <id> its config id (no workspace):
 *   int         fact_<id>_can_implement(const FactRopeArgs*);
 *   int         fact_<id>_run(const FactRopeArgs*);
 *   const char* fact_<id>_describe(void);
 */

enum FactStatus {
  FACT_OK = 0,
  FACT_ERR_SHAPE = 1,        /* the kernel cannot take this shape/alignment */
  FACT_ERR_WORKSPACE = 2,    /* workspace missing or too small */
  FACT_ERR_INIT = 3,         /* CUTLASS initialize() failed */
  FACT_ERR_LAUNCH = 4,       /* the launch failed (cudaGetLastError) */
  FACT_ERR_UNSUPPORTED = 5   /* device or arch not supported */
};

/* Row-wise chain kernels (generated by the agent, src/agent/): out[r, c] = f(in0[r, :], in1[r, :], ...)
 * for a chain of elementwise ops and reductions over the last dim. Every tensor has the kernel's one
 * dtype (fixed at generation). Row r of input i starts at inputs[i] + r * input_row_stride[i] elements;
 * a stride of 0 shares one [cols] row with every row (a weight vector). Columns are contiguous.
 * Exported by each kernel, with <id> its registry id:
 *   int         fact_<id>_run(const FactRowwiseArgs*);  0 = launched, else a FactStatus
 *   const char* fact_<id>_describe(void);               JSON of its config (block size, tiling, ...) */
#define FACT_ROWWISE_MAX_INPUTS 4
typedef struct FactRowwiseArgs {
  int64_t rows, cols;
  int32_t num_inputs;
  const void* inputs[FACT_ROWWISE_MAX_INPUTS];
  int64_t input_row_stride[FACT_ROWWISE_MAX_INPUTS];
  void* output; int64_t output_row_stride;
  void* stream;          /* cudaStream_t */
} FactRowwiseArgs;

#endif
