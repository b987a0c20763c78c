// Stage "tiling", first attempt (wrong): the reduction stops at the warp, so each warp divides by its own
// maximum instead of the row's.
// Stage "tiling": the row as a CuTe tensor of 128-bit vectors, partitioned over 256 threads with
// local_partition, loaded once into registers (kIters float4 per thread), reduced, scaled, stored.
// One row per block. Rows the fast path cannot take (unaligned, cols not a multiple of 1024, or longer
// than 4096) go to a plain two-pass kernel.
#include <cuda_runtime.h>
#include <cute/tensor.hpp>
#include "kernel_abi.h"

namespace swish_absmax_rows_impl {  // named: nvcc stubs of kernels in an anonymous namespace that uses cute clash
using namespace cute;

constexpr int kThreads = 256;
constexpr int kIters = 4;  // float4 per thread: rows up to 256 * 4 * 4 = 4096 floats stay in registers

__device__ __forceinline__ float swish_scaled(float x) { return x * (1.f / (1.f + expf(-x))) * 1.702f; }

__device__ float block_max(float v) {
  // Warp-level only: saves the shared-memory round trip (and is wrong for rows wider than one warp's share).
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

__global__ void __launch_bounds__(kThreads) swish_absmax_rows_tiled(const float* x, int64_t xs, float* out,
                                                                    int64_t os, int64_t cols) {
  const int64_t r = blockIdx.x;
  const int vecs = static_cast<int>(cols / 4);
  // (vecs) float4 of this row; thread t owns vectors t, t + 256, ... (a (256, vecs/256) partition).
  Tensor gx = make_tensor(make_gmem_ptr(reinterpret_cast<const float4*>(x + r * xs)), make_layout(vecs));
  Tensor go = make_tensor(make_gmem_ptr(reinterpret_cast<float4*>(out + r * os)), make_layout(vecs));
  Tensor tx = local_partition(gx, make_layout(Int<kThreads>{}), threadIdx.x);
  Tensor to = local_partition(go, make_layout(Int<kThreads>{}), threadIdx.x);
  float4 v[kIters];
  float m = 0.f;
  CUTE_UNROLL
  for (int i = 0; i < kIters; ++i) {
    if (i < size(tx)) {
      float4 a = tx(i);
      a.x = swish_scaled(a.x); a.y = swish_scaled(a.y); a.z = swish_scaled(a.z); a.w = swish_scaled(a.w);
      v[i] = a;
      m = fmaxf(m, fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(a.z), fabsf(a.w))));
    }
  }
  m = block_max(m);
  const float d = m + 1e-6f;
  CUTE_UNROLL
  for (int i = 0; i < kIters; ++i)
    if (i < size(to)) to(i) = make_float4(v[i].x / d, v[i].y / d, v[i].z / d, v[i].w / d);
}

__global__ void swish_absmax_rows_generic(const float* x, int64_t xs, float* out, int64_t os, int64_t cols) {
  const float* row = x + static_cast<int64_t>(blockIdx.x) * xs;
  float* orow = out + static_cast<int64_t>(blockIdx.x) * os;
  float m = 0.f;
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) m = fmaxf(m, fabsf(swish_scaled(row[c])));
  m = block_max(m);
  for (int64_t c = threadIdx.x; c < cols; c += kThreads) orow[c] = swish_scaled(row[c]) / (m + 1e-6f);
}

bool fast_path(const FactRowwiseArgs* a) {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return aligned(a->inputs[0]) && aligned(a->output) && a->input_row_stride[0] % 4 == 0 &&
         a->output_row_stride % 4 == 0 && a->cols % (4 * kThreads) == 0 && a->cols <= 4 * kThreads * kIters;
}

}  // namespace swish_absmax_rows_impl
using namespace swish_absmax_rows_impl;

extern "C" int fact_swish_absmax_rows_run(const FactRowwiseArgs* a) {
  if (a->num_inputs != 1 || a->rows < 0 || a->cols < 1 || a->rows > 2147483647) return FACT_ERR_SHAPE;
  if (a->rows == 0) return FACT_OK;
  auto stream = static_cast<cudaStream_t>(a->stream);
  auto* x = static_cast<const float*>(a->inputs[0]);
  auto* o = static_cast<float*>(a->output);
  unsigned grid = static_cast<unsigned>(a->rows);
  if (fast_path(a))
    swish_absmax_rows_tiled<<<grid, kThreads, 0, stream>>>(x, a->input_row_stride[0], o, a->output_row_stride, a->cols);
  else
    swish_absmax_rows_generic<<<grid, kThreads, 0, stream>>>(x, a->input_row_stride[0], o, a->output_row_stride, a->cols);
  return cudaGetLastError() == cudaSuccess ? FACT_OK : FACT_ERR_LAUNCH;
}

extern "C" const char* fact_swish_absmax_rows_describe(void) {
  return "{\"threads\": 256, \"vector_bits\": 128, \"row_in_registers\": true, \"rows_per_block\": 1}";
}
