#pragma once
// The tuner's builder: compiles candidate kernel sources into shared libraries, in parallel, into a
// content-addressed cache. One bad candidate (compile error, time-out) is recorded and skipped, never
// fatal, because a config space always holds some configs the compiler rejects. A job with a link step keeps
// the compiled object in the cache beside the library, so the op library links a winner's object from the
// cache instead of compiling its kernel again: one cache, each kernel compiled once.
#include <chrono>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace fact {

// One candidate to compile. `command` is an argv template; in each element these placeholders are
// replaced: {source} (the source file written from `source`), {output} (the library to produce) and
// {dir} (a scratch directory, also the working directory). Example:
//   {"nvcc", "-shared", "-Xcompiler", "-fPIC", "-arch=sm_90a", "-o", "{output}", "{source}"}
struct BuildJob {
  std::string id;                        // candidate config id: names the job in progress and results
  std::string source;                    // full source text
  std::string extension = ".cu";         // of the source file, so the compiler picks the language
  std::vector<std::string> command;      // argv template (see above)
  std::chrono::seconds timeout{600};     // a compile that runs longer is killed and reported as timeout
  // Optional: links the object `command` compiled ({object}) into the library ({output}); {dir} as above. With
  // it, `command`'s {output} is the object file, and the cache keeps the object too (BuildResult::object).
  std::vector<std::string> link_command;
};

enum class BuildStatus { built, cached, failed, timeout };
const char* to_string(BuildStatus status);  // "built", "cached", "failed", "timeout"

struct BuildResult {
  std::string id;
  BuildStatus status = BuildStatus::failed;
  std::filesystem::path library;  // the shared library in the cache; empty unless built or cached
  std::filesystem::path object;   // the compiled object in the cache, for jobs with a link step; else empty
  double seconds = 0;             // wall time spent on this job now (near 0 when cached)
  int exit_code = 0;              // compiler exit code; -1 when killed or not startable
  std::string diagnostics;        // trimmed compiler output: first errors, capped length
  std::string cache_key;          // hex SHA-256 naming the cache entry
  bool ok() const { return status == BuildStatus::built || status == BuildStatus::cached; }
};

struct BuildProgress {
  std::size_t done = 0;  // jobs finished so far, this one included
  std::size_t total = 0;
  std::string id;
  BuildStatus status = BuildStatus::failed;
};
// Called once per job as it finishes, one call at a time (never concurrently), so a progress bar needs no lock.
using BuildProgressFn = std::function<void(const BuildProgress&)>;

struct BuildOptions {
  std::filesystem::path cache_dir;  // empty: default_kernel_cache_dir()
  // Folded into every cache key: whatever changes the output but is not in the argv, e.g. the
  // `nvcc --version` text and the CUTLASS version.
  std::string compiler_version;
  unsigned workers = 0;                    // 0: std::thread::hardware_concurrency()
  std::size_t max_diagnostics_chars = 4000;
  BuildProgressFn on_progress;
};

// Builds every job; returns one result per job, in the order of `jobs`. Throws Error only when the
// cache directory cannot be created. Identical jobs in one batch are compiled once.
std::vector<BuildResult> build_kernels(const std::vector<BuildJob>& jobs, const BuildOptions& options = {});

// The cache key of a job: SHA-256 over its source text, extension, argv templates and the compiler version.
std::string build_cache_key(const BuildJob& job, const std::string& compiler_version);

// Hex SHA-256 of a text (the cache's content hash), e.g. to tell whether a source file is the one a cached
// object was compiled from.

// Runs e.g. {"nvcc", "--version"} and returns its output, for BuildOptions::compiler_version.
// Throws Error naming the command when it cannot run or fails.
std::string compiler_version(const std::vector<std::string>& version_argv);

// Keeps the first error lines (each with the two lines after it, where nvcc shows the source and a
// caret) or, when no line says "error", the last lines; never longer than about `max_chars`.
std::string trim_diagnostics(const std::string& text, std::size_t max_chars);

// $FACT_KERNEL_CACHE, else ~/.cache/fact/kernels.
std::filesystem::path default_kernel_cache_dir();

}  // namespace fact
