#pragma once
// The families' nvcc checks: a rendered kernel written to a scratch folder and compiled with the production nvcc
// command, into a shared library for its arch (reporting the time) or, with a main() appended, run on the host.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <optional>
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

// A rendered kernel with a main() appended, compiled by nvcc (the production command, as an executable) into
// $TMPDIR/dir_name/name and run (ten minutes at most each); fails the test and returns nothing where it does not build.
inline std::optional<fact::ProcessResult> build_and_run(fact::Arch arch, const std::string& text,
                                                        const std::string& dir_name, const std::string& name) {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / dir_name;
  fs::create_directories(dir);
  fs::path cu = dir / (name + ".cu"), exe = dir / name;
  fact::write_file_atomic(cu, text);
  auto argv = fact::realize::nvcc_command(arch, cu, exe, fact::cutlass_dir());
  argv.erase(std::remove(argv.begin(), argv.end(), std::string("-shared")), argv.end());
  fact::ProcessOptions o;
  o.timeout = std::chrono::seconds(600);
  auto built = fact::run_process(argv, o);
  EXPECT_EQ(built.exit_code, 0) << name << "\n" << built.err.substr(0, 4000);
  if (built.exit_code != 0) return std::nullopt;
  return fact::run_process({exe.string()}, o);
}

// ... on the host (its host and host-device functions: a kernel's index math checked without a GPU). Expects both to
// succeed; the run's output (its mismatches, printed by main) goes into the failure message.
inline void expect_runs_on_the_host(fact::Arch arch, const std::string& text, const std::string& name) {
  auto ran = build_and_run(arch, text, "fact_test_host_run", name);
  if (ran) EXPECT_EQ(ran->exit_code, 0) << name << ": " << ran->out.substr(0, 3000);
}

// ... where a GPU is: main() returns 77 when it finds no CUDA device, and the test then skips, saying so (the build
// is still checked). The executable stays in $TMPDIR/fact_test_gpu_run for a GPU machine to run.
inline void expect_runs_on_the_gpu(fact::Arch arch, const std::string& text, const std::string& name) {
  auto ran = build_and_run(arch, text, "fact_test_gpu_run", name);
  if (!ran) return;
  std::printf("%s", ran->out.c_str());
  if (ran->exit_code == 77) GTEST_SKIP() << name << " built; no CUDA device here to run it ($TMPDIR/fact_test_gpu_run)";
  EXPECT_EQ(ran->exit_code, 0) << name << ": " << ran->out.substr(0, 3000);
}
