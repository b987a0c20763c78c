// Appended to templates/cutlass/fp32_activation.hpp.in by tests/cpp/test_fp32_activation.cpp and run on a GPU:
// the device paths of div_by_normal and div_by_reciprocal (rcp.approx, FMAs and selects, which the host build
// replaces by a plain division) against CUDA's IEEE division __fdiv_rn, on every pair of special operands (signed
// zeros, infinities, NaN, denormals, the ends of the reciprocal's range) and on 2^26 pairs of random bit patterns
// (every exponent equally often, so denormal and huge divisors by the million).
// Promise checked: the same bits as IEEE (NaN for NaN, zeros' signs) but for at most 1 ulp where the quotient is
// denormal or |a| < 2^-102 (where the correction step's remainder is denormal).
// Exit 0: kept; 1: a mismatch (printed); 77: no CUDA device here.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace {

constexpr int kPaths = 2;  // 0: div_by_reciprocal with divisor_scale and row_reciprocal; 1: div_by_normal
constexpr int kExamples = 8;

struct Tally {
  unsigned long long checked[kPaths];
  unsigned long long exact[kPaths];
  unsigned long long denormal_ulp[kPaths];  // 1 ulp off where the quotient is denormal or |a| < 2^-102: allowed
  unsigned long long wrong[kPaths];
  unsigned int examples[kPaths];
  float example[kPaths][kExamples][4];  // a, b, IEEE, got
};

__constant__ float kSpecial[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1.0f, -1.0f, 3.0f, 0.1f, -7.5f,
                                 1.40129846e-45f, -1.40129846e-45f, 1e-40f, 1.17549421e-38f,   // denormals
                                 1.17549435e-38f, -1.17549435e-38f, 2.3509887e-38f,           // smallest normals
                                 8.50705867e+37f, 8.50705917e+37f, -8.50705917e+37f,          // below / at 2^126
                                 1.7014118e+38f, 3.40282347e+38f, -3.40282347e+38f,           // up to FLT_MAX
                                 5.42101086e-20f, 1.84467441e+19f, 6.0e37f, 1.5e-38f, 4.0e-39f};
constexpr int kSpecials = sizeof(kSpecial) / sizeof(float);

__device__ uint32_t mix(uint64_t x) {  // splitmix64's finaliser
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return uint32_t(x ^ (x >> 31));
}

__device__ bool is_nan(float x) { return x != x; }

__device__ void record(Tally* t, int path, float a, float b, float ieee, float got) {
  atomicAdd(&t->checked[path], 1ull);
  uint32_t gi = __float_as_uint(ieee), gg = __float_as_uint(got);
  if (gi == gg || (is_nan(ieee) && is_nan(got))) {
    atomicAdd(&t->exact[path], 1ull);
    return;
  }
  bool same_sign = (gi >> 31) == (gg >> 31);
  uint32_t mi = gi & 0x7fffffffu, mg = gg & 0x7fffffffu;
  uint32_t ulps = mi > mg ? mi - mg : mg - mi;
  bool denormal = mi < 0x00800000u || mg < 0x00800000u || fabsf(a) < 0x1p-102f;
  if (same_sign && ulps == 1 && denormal && !is_nan(got)) {
    atomicAdd(&t->denormal_ulp[path], 1ull);
    return;
  }
  atomicAdd(&t->wrong[path], 1ull);
  unsigned int k = atomicAdd(&t->examples[path], 1u);
  if (k < kExamples) {
    t->example[path][k][0] = a, t->example[path][k][1] = b;
    t->example[path][k][2] = ieee, t->example[path][k][3] = got;
  }
}

__device__ void check(Tally* t, float a, float b) {
  const float ieee = __fdiv_rn(a, b);
  const float s = fact_act::divisor_scale(b), bs = b * s;
  record(t, 0, a, b, ieee, fact_act::div_by_reciprocal(a, bs, fact_act::row_reciprocal(bs), s));
  const float m = fabsf(b);
  if (m >= FLT_MIN && m < 8.50705917e+37f) record(t, 1, a, b, ieee, fact_act::div_by_normal(a, b));
}

__global__ void special_pairs(Tally* t) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < kSpecials * kSpecials) check(t, kSpecial[i / kSpecials], kSpecial[i % kSpecials]);
}

__global__ void random_pairs(Tally* t, uint64_t n) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < n; i += uint64_t(gridDim.x) * blockDim.x)
    check(t, __uint_as_float(mix(2 * i)), __uint_as_float(mix(2 * i + 1)));
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device\n");
    return 77;
  }
  Tally* t = nullptr;
  if (cudaMalloc(&t, sizeof(Tally)) != cudaSuccess || cudaMemset(t, 0, sizeof(Tally)) != cudaSuccess) return 1;
  special_pairs<<<(kSpecials * kSpecials + 255) / 256, 256>>>(t);
  random_pairs<<<1024, 256>>>(t, uint64_t(1) << 26);
  Tally h;
  cudaError_t e = cudaMemcpy(&h, t, sizeof(Tally), cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(e));
    return 1;
  }
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s\n", prop.name);
  const char* names[kPaths] = {"div_by_reciprocal", "div_by_normal"};
  bool ok = true;
  for (int p = 0; p < kPaths; ++p) {
    std::printf("%s: %llu pairs, %llu the IEEE bits, %llu 1 ulp off (denormal quotient or |a| < 2^-102), %llu wrong\n", names[p],
                h.checked[p], h.exact[p], h.denormal_ulp[p], h.wrong[p]);
    for (unsigned k = 0; k < h.examples[p] && k < kExamples; ++k)
      std::printf("  %a / %a: IEEE %a, got %a\n", h.example[p][k][0], h.example[p][k][1], h.example[p][k][2],
                  h.example[p][k][3]);
    ok = ok && h.wrong[p] == 0 && h.checked[p] > 0;
  }
  return ok ? 0 : 1;
}
