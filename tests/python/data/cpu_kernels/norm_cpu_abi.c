// RMSNorm with a weight on host memory exporting the FACT kernel C ABI (kernel_abi.h, `fact ops abi-header`): a
// stand-in candidate that lets tests/python/test_measure_worker.py run the measuring worker on the CPU.
//   -DFACT_ID=<id>   exported names fact_<id>_{can_implement,run,describe}
//   -DFACT_BUG=0|1   1 writes whole blocks of 8 rows, past the last row when rows is no multiple of 8
#include <math.h>

#include "kernel_abi.h"

#ifndef FACT_BUG
#define FACT_BUG 0
#endif

#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define FN(name) CAT3(fact_, FACT_ID, _##name)

int FN(can_implement)(const FactNormArgs* args) {
  return args->weight && !args->bias && !args->residual ? FACT_OK : FACT_ERR_UNSUPPORTED;
}

int FN(run)(const FactNormArgs* p) {
  const int64_t rows = FACT_BUG ? (p->rows + 7) / 8 * 8 : p->rows;
  const float* w = (const float*)p->weight;
  for (int64_t r = 0; r < rows; ++r) {
    float* y = (float*)p->y + r * p->y_row_stride;
    if (r >= p->rows) {
      for (int64_t c = 0; c < p->cols; ++c) y[c] = 0.0f;
      continue;
    }
    const float* x = (const float*)p->x + r * p->x_row_stride;
    double squares = 0.0;
    for (int64_t c = 0; c < p->cols; ++c) squares += (double)x[c] * x[c];
    const double scale = 1.0 / sqrt(squares / p->cols + p->eps);
    for (int64_t c = 0; c < p->cols; ++c) y[c] = (float)(x[c] * scale * w[c]);
  }
  return FACT_OK;
}

const char* FN(describe)(void) { return "{\"kernel\": \"cpu stand-in\"}"; }
