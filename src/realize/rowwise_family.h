#pragma once
// The row-wise family: a chain of elementwise ops and last-dim reductions realized by a kernel the agent
// generated, verified and registered in the user's pattern registry (src/discover/user_registry.*).
#include "realize/kernel_family.h"

namespace fact::realize {
const KernelFamily& rowwise_family();
}
