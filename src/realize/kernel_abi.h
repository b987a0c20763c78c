/* The C ABI every generated GEMM-family kernel exports, so the tuner can load a candidate library
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
enum FactStatus {
  FACT_OK = 0,
  FACT_ERR_SHAPE = 1,        /* the kernel cannot take this shape/alignment */
  FACT_ERR_WORKSPACE = 2,    /* workspace missing or too small */
  FACT_ERR_INIT = 3,         /* CUTLASS initialize() failed */
  FACT_ERR_LAUNCH = 4,       /* the launch failed (cudaGetLastError) */
  FACT_ERR_UNSUPPORTED = 5   /* device or arch not supported */
};

#endif
