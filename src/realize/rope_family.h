#pragma once
// The rotary position embedding kernel family (half-split RoPE as a fused pre-pass).
#include "realize/kernel_family.h"

namespace fact::realize {
const KernelFamily& rope_family();
}
