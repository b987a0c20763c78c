// A naive GEMM exporting the FACT kernel C ABI (kernel_abi.h, from `fact ops abi-header`): a reference candidate for
// validating `python -m fact.realize.measure`, not for speed. One thread per output element, fp32
// accumulation. The config is fixed at compile time, as for generated kernels:
//   -DFACT_ID=<id>                 exported names fact_<id>_{can_implement,workspace_bytes,run,describe}
//   -DFACT_ELEMENT=float|__nv_bfloat16|__half   A, B, bias, residual and D element type
//   -DFACT_A_COL=0|1 -DFACT_B_COL=0|1            column-major A / B (D is row-major)
//   -DFACT_EPILOGUE=0..6           none, bias, bias_relu, bias_silu, bias_gelu_erf, bias_gelu_tanh, bias_residual
//   -DFACT_NAIVE_BUG=0..5          deliberate faults the verifier must catch:
//       1 drops the last k step, 2 leaves the last column unwritten, 3 writes one element past D,
//       4 writes to an unmapped address (poisons the CUDA context), 5 spins ~25 s (a hang, bounded).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include "kernel_abi.h"

#ifndef FACT_ID
#define FACT_ID naive
#endif
#ifndef FACT_ELEMENT
#define FACT_ELEMENT float
#endif
#ifndef FACT_A_COL
#define FACT_A_COL 0
#endif
#ifndef FACT_B_COL
#define FACT_B_COL 0
#endif
#ifndef FACT_EPILOGUE
#define FACT_EPILOGUE 0
#endif
#ifndef FACT_NAIVE_BUG
#define FACT_NAIVE_BUG 0
#endif

#define FACT_STR_(x) #x
#define FACT_STR(x) FACT_STR_(x)
#define FACT_CAT3_(a, b, c) a##b##c
#define FACT_CAT3(a, b, c) FACT_CAT3_(a, b, c)
#define FACT_FN(name) FACT_CAT3(fact_, FACT_ID, _##name)

using Element = FACT_ELEMENT;

template <typename T> __device__ inline float to_float(T x) { return static_cast<float>(x); }
template <> __device__ inline float to_float<__nv_bfloat16>(__nv_bfloat16 x) { return __bfloat162float(x); }
template <> __device__ inline float to_float<__half>(__half x) { return __half2float(x); }
template <typename T> __device__ inline T from_float(float x) { return static_cast<T>(x); }
template <> __device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <> __device__ inline __half from_float<__half>(float x) { return __float2half_rn(x); }

template <int Epilogue> __device__ inline float activation(float x) {
  if (Epilogue == 2) return x > 0.f ? x : 0.f;
  if (Epilogue == 3) return x / (1.f + expf(-x));
  if (Epilogue == 4) return 0.5f * x * (1.f + erff(x * 0.70710678118654752f));
  if (Epilogue == 5) return 0.5f * x * (1.f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
  return x;
}

template <typename T, bool ACol, bool BCol, int Epilogue>
__global__ void naive_gemm(FactGemmArgs args) {
  const int64_t n = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  const int64_t m = blockIdx.y * (int64_t)blockDim.y + threadIdx.y;
  const int64_t b = blockIdx.z;
#if FACT_NAIVE_BUG == 5
  if (m == 0 && n == 0 && b == 0) {
    unsigned long long t0, t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); } while (t - t0 < 25ull * 1000000000ull);
  }
#endif
  if (m >= args.m || n >= args.n) return;
  const T* A = static_cast<const T*>(args.a) + b * args.batch_stride_a;
  const T* B = static_cast<const T*>(args.b) + b * args.batch_stride_b;
  T* D = static_cast<T*>(args.d) + b * args.batch_stride_d;
  int64_t k_end = args.k;
#if FACT_NAIVE_BUG == 1
  k_end -= 1;
#endif
  float acc = 0.f;
  for (int64_t kk = 0; kk < k_end; ++kk) {
    const float a = to_float(ACol ? A[kk * args.lda + m] : A[m * args.lda + kk]);
    const float bv = to_float(BCol ? B[n * args.ldb + kk] : B[kk * args.ldb + n]);
    acc = fmaf(a, bv, acc);
  }
  float v = args.alpha * acc;
  if (args.beta != 0.f && args.c != nullptr) {
    const T* C = static_cast<const T*>(args.c) + b * args.batch_stride_c;
    v += args.beta * to_float(C[m * args.ldc + n]);
  }
  if (Epilogue != 0) v += to_float(static_cast<const T*>(args.bias)[n]);
  v = activation<Epilogue>(v);
  if (Epilogue == 6) {
    const T* R = static_cast<const T*>(args.residual) + b * args.batch_stride_d;
    v += to_float(R[m * args.ldd + n]);
  }
#if FACT_NAIVE_BUG == 2
  if (n == args.n - 1) return;
#endif
#if FACT_NAIVE_BUG == 3
  if (m == args.m - 1 && n == args.n - 1 && b == args.batch - 1) D[m * args.ldd + n + 1] = from_float<T>(v);
#endif
#if FACT_NAIVE_BUG == 4
  if (m == 0 && n == 0 && b == 0) D[(int64_t)1 << 40] = from_float<T>(v);
#endif
  D[m * args.ldd + n] = from_float<T>(v);
}

static const char* element_name() {
  return sizeof(Element) == 4 ? "float32" : (FACT_STR(FACT_ELEMENT)[2] == 'n' ? "bfloat16" : "float16");
}

extern "C" {

__attribute__((visibility("default"))) int FACT_FN(can_implement)(const FactGemmArgs* args) {
  if (!args || args->m < 1 || args->n < 1 || args->k < 1 || args->batch < 1 || args->batch > 65535) return FACT_ERR_SHAPE;
  if (!args->a || !args->b || !args->d) return FACT_ERR_SHAPE;
  if (args->lda < (FACT_A_COL ? args->m : args->k) || args->ldb < (FACT_B_COL ? args->k : args->n) ||
      args->ldd < args->n)
    return FACT_ERR_SHAPE;
  if (FACT_EPILOGUE != 0 && !args->bias) return FACT_ERR_SHAPE;
  if (FACT_EPILOGUE == 6 && !args->residual) return FACT_ERR_SHAPE;
  if (args->beta != 0.f && !args->c) return FACT_ERR_SHAPE;
  return FACT_OK;
}

__attribute__((visibility("default"))) size_t FACT_FN(workspace_bytes)(const FactGemmArgs*) { return 0; }

__attribute__((visibility("default"))) int FACT_FN(run)(const FactGemmArgs* args) {
  int status = FACT_FN(can_implement)(args);
  if (status != FACT_OK) return status;
  dim3 block(16, 16, 1);
  dim3 grid((unsigned)((args->n + 15) / 16), (unsigned)((args->m + 15) / 16), (unsigned)args->batch);
  naive_gemm<Element, FACT_A_COL != 0, FACT_B_COL != 0, FACT_EPILOGUE>
      <<<grid, block, 0, static_cast<cudaStream_t>(args->stream)>>>(*args);
  return cudaGetLastError() == cudaSuccess ? FACT_OK : FACT_ERR_LAUNCH;
}

__attribute__((visibility("default"))) const char* FACT_FN(describe)(void) {
  static char text[256];
  snprintf(text, sizeof text,
           "{\"kernel\": \"naive\", \"element\": \"%s\", \"layout_a\": \"%s\", \"layout_b\": \"%s\", "
           "\"epilogue\": %d, \"bug\": %d}",
           element_name(), FACT_A_COL ? "col" : "row", FACT_B_COL ? "col" : "row", FACT_EPILOGUE, FACT_NAIVE_BUG);
  return text;
}

}  // extern "C"
