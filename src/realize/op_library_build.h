#pragma once
// The op library stage as one call: the winners of tune reports written as an op library folder (op_library.h)
// and, when asked, compiled and linked into DIR/libfact_ops.so by the Python builder
// (python -m fact.realize.op_library_build, which needs the GPU machine's torch). `fact ops build` and
// `fact optimize` both call it.
#include <filesystem>
#include <ostream>
#include <vector>

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

}  // namespace fact::realize
