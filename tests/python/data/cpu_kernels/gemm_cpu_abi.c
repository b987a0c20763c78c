// A GEMM on host memory exporting the FACT kernel C ABI (kernel_abi.h, `fact ops abi-header`): a stand-in candidate
// that lets tests/python/test_measure_worker.py run the measuring worker on the CPU. fp32, row-major A and
// B (lda, ldb), batched; like a split-K kernel it needs its workspace and fails without one.
//   -DFACT_ID=<id>      exported names fact_<id>_{can_implement,workspace_bytes,run,describe}
//   -DFACT_SWIGLU=0|1   epilogue bias (0), or bias_silu_mul: silu(A@B + bias) * residual (1)
//   -DFACT_BUG=0..3     faults the worker must catch: 1 leaves the last column unwritten, 2 changes A after
//                       the product, 3 refuses every shape
//   -DFACT_SWIZZLE=<n>  like a run-time variant's kernel: refuses every call whose args->swizzle is not n
#include <math.h>
#include <string.h>

#include "kernel_abi.h"

#ifndef FACT_SWIGLU
#define FACT_SWIGLU 0
#endif
#ifndef FACT_BUG
#define FACT_BUG 0
#endif
#ifndef FACT_SWIZZLE
#define FACT_SWIZZLE 0
#endif
#define WORKSPACE_BYTES 256

#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define FN(name) CAT3(fact_, FACT_ID, _##name)

int FN(can_implement)(const FactGemmArgs* args) {
  if (args->swizzle != FACT_SWIZZLE) return FACT_ERR_SHAPE;
  return FACT_BUG == 3 ? FACT_ERR_SHAPE : FACT_OK;
}

size_t FN(workspace_bytes)(const FactGemmArgs* args) {
  (void)args;
  return WORKSPACE_BYTES;
}

int FN(run)(const FactGemmArgs* p) {
  if (p->swizzle != FACT_SWIZZLE) return FACT_ERR_SHAPE;
  if (!p->workspace || p->workspace_bytes < WORKSPACE_BYTES) return FACT_ERR_WORKSPACE;
  memset(p->workspace, 0, WORKSPACE_BYTES);
  const float* a = (const float*)p->a;
  const float* b = (const float*)p->b;
  const float* bias = (const float*)p->bias;
  const float* residual = (const float*)p->residual;
  float* d = (float*)p->d;
  for (int64_t z = 0; z < p->batch; ++z)
    for (int64_t i = 0; i < p->m; ++i)
      for (int64_t j = 0; j < p->n; ++j) {
        if (FACT_BUG == 1 && j == p->n - 1) continue;
        double acc = 0.0;
        for (int64_t k = 0; k < p->k; ++k)
          acc += (double)a[z * p->batch_stride_a + i * p->lda + k] * b[z * p->batch_stride_b + k * p->ldb + j];
        float v = (float)acc + (bias ? bias[j] : 0.0f);
        int64_t at = z * p->batch_stride_d + i * p->ldd + j;
        if (FACT_SWIGLU) v = v / (1.0f + expf(-v)) * residual[at];
        d[at] = v;
      }
  if (FACT_BUG == 2) ((float*)p->a)[0] += 1.0f;
  return FACT_OK;
}

const char* FN(describe)(void) { return "{\"kernel\": \"cpu stand-in\"}"; }
