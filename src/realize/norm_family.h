#pragma once
// The normalization kernel family (LayerNorm, RMSNorm, optional fused residual add).
#include "realize/kernel_family.h"

namespace fact::realize {
const KernelFamily& normalization_family();
}
