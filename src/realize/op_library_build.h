#pragma once
// The op library stage as one call: the winners of tune reports written as an op library folder (op_library.h)
// and, when asked, linked into DIR/libfact_ops.so: each winner's kernel object comes from the kernel cache the
// tuner built it into (compiled now, once, only where the cache lacks it), and the Python builder
// (fact.realize.op_library_build, in the Python worker; it needs the GPU machine's torch) compiles ops.cpp and
// links. `fact ops build` and `fact optimize` both call it.
#include <filesystem>
#include <ostream>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/op_library.h"

namespace fact::realize {

struct OpLibraryBuildRequest {
  std::vector<std::filesystem::path> reports;  // written by the tune stage
  std::filesystem::path out;                   // the folder to write
  bool compile = false;                        // then compile and link DIR/libfact_ops.so
  unsigned jobs = 0;                           // parallel compiles; 0: all cores
};

// The table of ops goes to `out`, the builder's messages to `log`. Throws Error naming the report, or saying
// why the library did not build and how to build it by hand.
OpLibraryFolder build_op_library(const OpLibraryBuildRequest& request, std::ostream& out, std::ostream& log);

// Each op's kernel object from the kernel cache (the tuner's build job, kernel_build_job.h; compiled now only where
// the cache lacks it), listed in DIR/prebuilt_objects.json for the Python builder; returns that listing. A kernel
// that does not build is left out (the builder then compiles it and reports the error). Exposed for tests.
nlohmann::json prebuild_kernel_objects(const OpLibraryFolder& folder, unsigned jobs, std::ostream& log);

}  // namespace fact::realize
