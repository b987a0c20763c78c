#pragma once
// How a family's rendered kernel is built, in one place for the tuner and the op library: nvcc compiles the
// kernel to an object in the kernel cache, then links the candidate's shared library (what the runner loads) from
// it. The op library asks the builder for the same job, so the same source and nvcc argv hit the same cache entry
// and links the winner's cached object: each kernel is compiled once.
#include "realize/kernel_builder.h"
#include "realize/kernel_family.h"

namespace fact::realize {

// The build job of a rendered candidate: id = config id; compile with nvcc_command(..., object), then link.
BuildJob kernel_build_job(const FamilyCandidate& candidate);

// Builder options whose cache keys fold in the toolchain (nvcc --version, the CUTLASS version).
BuildOptions kernel_build_options(unsigned workers = 0, BuildProgressFn on_progress = {});

}  // namespace fact::realize
