// Round 1 (stage correct), as an LLM might first write it: the block reduction uses a name it never declared.
#include <cuda_runtime.h>
#include "kernel_abi.h"

__global__ void swish_absmax_rows_kernel(const float* x, int64_t xs, float* out, int64_t os, int64_t cols) {
  const float* row = x + blockIdx.x * xs;
  float m = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = row[c];
    m = fmaxf(m, fabsf(v / (1.f + expf(-v)) * 1.702f));
  }
  m = block_reduce_max(m);
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    float v = row[c];
    out[blockIdx.x * os + c] = v / (1.f + expf(-v)) * 1.702f / (m + 1e-6f);
  }
}

extern "C" int fact_swish_absmax_rows_run(const FactRowwiseArgs* a) {
  swish_absmax_rows_kernel<<<a->rows, 256, 0, (cudaStream_t)a->stream>>>(
      (const float*)a->inputs[0], a->input_row_stride[0], (float*)a->output, a->output_row_stride, a->cols);
  return cudaGetLastError() == cudaSuccess ? FACT_OK : FACT_ERR_LAUNCH;
}
extern "C" const char* fact_swish_absmax_rows_describe(void) { return "{\"threads\": 256}"; }
