// Stage "correct": one 256-thread block per row, two passes over the row (max of |y|, then y / (max + eps)),
// the block maximum through warp shuffles and shared memory. y = x * sigmoid(x) * 1.702, as the graph.
#include <cuda_runtime.h>
#include "kernel_abi.h"

namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ float swish_scaled(float x) { return x * (1.f / (1.f + expf(-x))) * 1.702f; }

__device__ float block_max(float v) {
  __shared__ float warp_max[kThreads / 32];
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = v;
  __syncthreads();
  v = threadIdx.x < kThreads / 32 ? warp_max[threadIdx.x] : 0.f;
  if (threadIdx.x < 32)
    for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  __shared__ float result;
  if (threadIdx.x == 0) result = v;
  __syncthreads();
  return result;
}

__global__ void swish_absmax_rows_kernel(const float* x, int64_t xs, float* out, int64_t os, int64_t cols) {
  const float* row = x + static_cast<int64_t>(blockIdx.x) * xs;
  float* orow = out + static_cast<int64_t>(blockIdx.x) * os;
  float m = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, fabsf(swish_scaled(row[c])));
  m = block_max(m);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) orow[c] = swish_scaled(row[c]) / (m + 1e-6f);
}

}  // namespace

extern "C" int fact_swish_absmax_rows_run(const FactRowwiseArgs* a) {
  if (a->num_inputs != 1 || a->rows < 0 || a->cols < 1 || a->rows > 2147483647) return FACT_ERR_SHAPE;
  if (a->rows == 0) return FACT_OK;
  swish_absmax_rows_kernel<<<static_cast<unsigned>(a->rows), kThreads, 0, (cudaStream_t)a->stream>>>(
      static_cast<const float*>(a->inputs[0]), a->input_row_stride[0], static_cast<float*>(a->output),
      a->output_row_stride, a->cols);
  return cudaGetLastError() == cudaSuccess ? FACT_OK : FACT_ERR_LAUNCH;
}

extern "C" const char* fact_swish_absmax_rows_describe(void) {
  return "{\"threads\": 256, \"rows_per_block\": 1, \"passes\": 2}";
}
