#pragma once
// The attention kernel family (forward, causal or not, grouped-query heads, strided Q/K/V).
#include "realize/kernel_family.h"

namespace fact::realize {
const KernelFamily& attention_family();
}
