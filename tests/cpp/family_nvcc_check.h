#pragma once
// One check for the families' nvcc tests (norm, rope, attention): writes a rendered kernel to a scratch
// folder, compiles it into a shared library for its arch with the production nvcc command, reports the time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/files.h"
#include "core/paths.h"
#include "core/process.h"
#include "realize/nvcc_command.h"

inline void expect_kernel_compiles(fact::Arch arch, const std::string& text, const std::string& name,
                                   const std::string& summary) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / "fact_test_nvcc";
  fs::create_directories(dir);
  fs::path cu = dir / (name + ".cu"), so = dir / (name + ".so");
  fact::write_file_atomic(cu, text);
  auto t0 = std::chrono::steady_clock::now();
  fact::ProcessOptions o;
  o.timeout = std::chrono::seconds(600);
  auto r = fact::run_process(fact::realize::nvcc_command(arch, cu, so, fact::cutlass_dir()), o);
  std::printf("[nvcc] %s (%s): %.1f s, exit %d\n", name.c_str(), summary.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), r.exit_code);
  EXPECT_EQ(r.exit_code, 0) << summary << "\n" << r.err.substr(0, 6000);
  EXPECT_TRUE(fs::exists(so));
}
