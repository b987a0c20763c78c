/***************************************************************************************************
 * Copyright (c) 2017 - 2025 Fixture Corporation. All rights reserved.
 * SPDX-License-Identifier: BSD-3-Clause
 * Redistribution and use in source and binary forms, with or without modification, are permitted.
 **************************************************************************************************/
// Single precision GEMM on Ampere tensor cores with implicit TF32 conversion.
#include "cutlass/gemm/device/gemm.h"
using ElementA = float;
using MathOperator = cutlass::arch::OpMultiplyAddFastF32;  // 3xTF32: fast accurate SGEMM
using Gemm = cutlass::gemm::device::Gemm<ElementA, LayoutA, ElementA, LayoutB, float>;
int run_gemm(int m, int n, int k) { Gemm gemm_op; return gemm_op({m, n, k}) ? 0 : 1; }
