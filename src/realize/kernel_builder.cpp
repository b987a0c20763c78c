#include "realize/kernel_builder.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/files.h"
#include "core/process.h"
#include "core/process_counts.h"
#include "core/sha256.h"

namespace fact {
namespace fs = std::filesystem;

namespace {

constexpr const char* kLibraryName = "kernel.so";
constexpr const char* kObjectName = "kernel.o";

// Length-prefixed, so {"ab","c"} and {"a","bc"} hash differently.
void append_field(std::string& out, const std::string& field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t pos = text.find(from); pos != std::string::npos; pos = text.find(from, pos + to.size()))
    text.replace(pos, from.size(), to);
  return text;
}

std::vector<std::string> expand_command(const std::vector<std::string>& argv_template, const fs::path& source,
                                        const fs::path& output, const fs::path& dir, const fs::path& object = {}) {
  std::vector<std::string> argv;
  for (const auto& arg : argv_template)
    argv.push_back(replace_all(
        replace_all(replace_all(replace_all(arg, "{source}", source.string()), "{output}", output.string()), "{dir}",
                    dir.string()),
        "{object}", object.string()));
  return argv;
}

bool contains_error(const std::string& line) {
  std::string lower(line);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("error") != std::string::npos || lower.find("undefined reference") != std::string::npos;
}

std::string join_command(const std::vector<std::string>& argv) {
  std::string s;
  for (const auto& a : argv) s += (s.empty() ? "" : " ") + a;
  return s;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Builds one job into cache_dir/<key>/. Compiles in a private scratch directory and renames it into
// place, so concurrent processes building the same key never see a half-written library.
BuildResult build_one(const BuildJob& job, const std::string& key, const fs::path& cache_dir,
                      const BuildOptions& options) {
  static std::atomic<unsigned> scratch_counter{0};
  auto start = std::chrono::steady_clock::now();
  BuildResult r;
  r.id = job.id;
  r.cache_key = key;
  const fs::path final_dir = cache_dir / key;
  const bool links = !job.link_command.empty();
  if (fs::exists(final_dir / kLibraryName) && (!links || fs::exists(final_dir / kObjectName))) {
    note_kernel_build(job.id, false);
    r.status = BuildStatus::cached;
    r.library = final_dir / kLibraryName;
    if (links) r.object = final_dir / kObjectName;
    r.seconds = seconds_since(start);
    return r;
  }
  r.exit_code = -1;
  if (job.command.empty()) {
    r.diagnostics = "job '" + job.id + "' has no command; give BuildJob::command an argv with {source} and {output}";
    return r;
  }

  const fs::path scratch =
      cache_dir / fmt::format(".tmp-{}-{}-{}", key.substr(0, 16), static_cast<long>(getpid()), scratch_counter++);
  std::error_code ignored;
  fs::remove_all(scratch, ignored);
  auto discard_scratch = [&] { fs::remove_all(scratch, ignored); };
  const fs::path source = scratch / ("kernel" + job.extension);
  const fs::path output = scratch / (links ? kObjectName : kLibraryName);
  std::vector<std::string> argv = expand_command(job.command, source, output, scratch);
  try {
    fs::create_directories(scratch);
    write_file_atomic(source, job.source);
  } catch (const std::exception& e) {
    r.diagnostics = fmt::format("cannot write the source of '{}' into {}: {}", job.id, scratch.string(), e.what());
    discard_scratch();
    return r;
  }

  ProcessOptions process_options;
  process_options.cwd = scratch;
  process_options.timeout = job.timeout;
  ProcessResult p;
  note_kernel_build(job.id, true);
  try {
    p = run_process(argv, process_options);
  } catch (const Error& e) {
    r.diagnostics = std::string(e.what()) + " (is the compiler on PATH? command: " + join_command(argv) + ")";
    r.seconds = seconds_since(start);
    discard_scratch();
    return r;
  }
  r.seconds = seconds_since(start);
  r.exit_code = p.exit_code;
  std::string output_text = p.err + (p.err.empty() || p.out.empty() ? "" : "\n") + p.out;
  if (p.timed_out) {
    r.status = BuildStatus::timeout;
    std::string tail = trim_diagnostics(output_text, options.max_diagnostics_chars);
    r.diagnostics = fmt::format("killed after {} s (BuildJob::timeout)", job.timeout.count()) +
                    (tail.empty() ? "" : "\n" + tail);
    discard_scratch();
    return r;
  }
  if (p.exit_code != 0) {
    r.diagnostics = trim_diagnostics(output_text, options.max_diagnostics_chars);
    if (r.diagnostics.empty()) r.diagnostics = fmt::format("exit code {} with no output", p.exit_code);
    discard_scratch();
    return r;
  }
  if (!fs::exists(output)) {
    r.diagnostics = std::string("the command exited 0 but wrote no ") + (links ? "object" : "library") +
                    " at {output}; check the command template: " + join_command(job.command);
    discard_scratch();
    return r;
  }

  std::vector<std::string> link_argv;
  if (links) {
    link_argv = expand_command(job.link_command, source, scratch / kLibraryName, scratch, output);
    ProcessResult l;
    try {
      l = run_process(link_argv, process_options);
    } catch (const Error& e) {
      l.err = e.what();
    }
    r.seconds = seconds_since(start);
    if (l.exit_code != 0 || !fs::exists(scratch / kLibraryName)) {
      r.exit_code = l.exit_code;
      std::string text = trim_diagnostics(l.err + (l.err.empty() || l.out.empty() ? "" : "\n") + l.out,
                                          options.max_diagnostics_chars);
      r.diagnostics = "linking the compiled object failed (" + join_command(link_argv) + ")" +
                      (text.empty() ? "" : ":\n" + text);
      discard_scratch();
      return r;
    }
  }

  nlohmann::json record = {{"id", job.id},           {"command", argv},
                           {"seconds", r.seconds},   {"compiler_version", options.compiler_version}};
  if (links) record["link_command"] = link_argv;
  write_file_atomic(scratch / "build.json", record.dump(2) + "\n");
  std::error_code rename_error;
  fs::rename(scratch, final_dir, rename_error);
  if (rename_error) {
    discard_scratch();
    // Another process finished the same key first: its library is just as good.
    if (!fs::exists(final_dir / kLibraryName) || (links && !fs::exists(final_dir / kObjectName))) {
      r.diagnostics = fmt::format("cannot move the built library into the cache at {}: {}", final_dir.string(),
                                  rename_error.message());
      return r;
    }
  }
  r.status = BuildStatus::built;
  r.library = final_dir / kLibraryName;
  if (links) r.object = final_dir / kObjectName;
  return r;
}

}  // namespace

const char* to_string(BuildStatus status) {
  switch (status) {
    case BuildStatus::built: return "built";
    case BuildStatus::cached: return "cached";
    case BuildStatus::failed: return "failed";
    case BuildStatus::timeout: return "timeout";
  }
  return "unknown";
}

std::string build_cache_key(const BuildJob& job, const std::string& compiler_version) {
  std::string material = "fact-kernel-build-v1\n";
  append_field(material, job.source);
  append_field(material, job.extension);
  append_field(material, std::to_string(job.command.size()));
  for (const auto& arg : job.command) append_field(material, arg);
  append_field(material, compiler_version);
  // Only jobs with a link step add it, so the keys of jobs without one stay as they were.
  if (!job.link_command.empty()) {
    append_field(material, "link");
    append_field(material, std::to_string(job.link_command.size()));
    for (const auto& arg : job.link_command) append_field(material, arg);
  }
  return sha256_hex(material);
}

std::string compiler_version(const std::vector<std::string>& version_argv) {
  ProcessOptions options;
  options.timeout = std::chrono::seconds(60);
  ProcessResult r = run_process(version_argv, options);
  if (r.exit_code != 0)
    throw Error("'" + join_command(version_argv) + "' failed (exit " + std::to_string(r.exit_code) +
                "): " + trim_diagnostics(r.err + r.out, 500) + "; check that the compiler is installed");
  return r.out;
}

std::string trim_diagnostics(const std::string& text, std::size_t max_chars) {
  constexpr size_t kMaxErrors = 5, kLinesAfterError = 2, kTailLines = 20;
  const size_t max_line = std::max<size_t>(200, max_chars / 4);
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.size() > max_line) line = line.substr(0, max_line) + " ...";
    lines.push_back(std::move(line));
  }

  std::vector<size_t> error_lines;
  for (size_t i = 0; i < lines.size(); ++i)
    if (contains_error(lines[i])) error_lines.push_back(i);
  std::vector<bool> keep(lines.size(), false);
  std::string note;
  if (!error_lines.empty()) {
    for (size_t e = 0; e < std::min(kMaxErrors, error_lines.size()); ++e)
      for (size_t i = error_lines[e]; i <= error_lines[e] + kLinesAfterError && i < lines.size(); ++i) keep[i] = true;
    if (error_lines.size() > kMaxErrors)
      note = fmt::format("... ({} more error lines)", error_lines.size() - kMaxErrors);
  } else {
    for (size_t i = lines.size() > kTailLines ? lines.size() - kTailLines : 0; i < lines.size(); ++i) keep[i] = true;
  }

  std::string out;
  for (size_t i = 0; i < lines.size(); ++i)
    if (keep[i]) out += lines[i] + "\n";
  if (!note.empty()) out += note + "\n";
  while (!out.empty() && out.back() == '\n') out.pop_back();
  const std::string cut = "\n... [truncated]";
  if (out.size() > max_chars) out = out.substr(0, max_chars > cut.size() ? max_chars - cut.size() : 0) + cut;
  return out;
}

fs::path default_kernel_cache_dir() {
  if (const char* v = std::getenv("FACT_KERNEL_CACHE"); v && *v) return v;
  const char* home = std::getenv("HOME");
  if (!home || !*home) throw Error("cannot place the kernel cache: HOME is not set; set FACT_KERNEL_CACHE to a folder");
  return fs::path(home) / ".cache" / "fact" / "kernels";
}

std::vector<BuildResult> build_kernels(const std::vector<BuildJob>& jobs, const BuildOptions& options) {
  const fs::path cache_dir = options.cache_dir.empty() ? default_kernel_cache_dir() : options.cache_dir;
  std::error_code ec;
  fs::create_directories(cache_dir, ec);
  if (ec || !fs::is_directory(cache_dir))
    throw Error("cannot create the kernel cache directory '" + cache_dir.string() + "'" +
                (ec ? ": " + ec.message() : "") + "; set FACT_KERNEL_CACHE (or BuildOptions::cache_dir) to a writable folder");

  // Identical jobs share a key: the first (leader) compiles, the rest (followers) take its result.
  std::vector<std::string> keys;
  std::map<std::string, size_t> leader_of_key;
  std::vector<size_t> leaders;
  std::map<size_t, std::vector<size_t>> followers;
  for (size_t i = 0; i < jobs.size(); ++i) {
    keys.push_back(build_cache_key(jobs[i], options.compiler_version));
    auto [it, inserted] = leader_of_key.emplace(keys[i], i);
    if (inserted) leaders.push_back(i);
    else followers[it->second].push_back(i);
  }

  std::vector<BuildResult> results(jobs.size());
  std::mutex progress_mutex;
  size_t done = 0;
  auto report = [&](size_t i) {
    std::lock_guard<std::mutex> lock(progress_mutex);
    ++done;
    if (options.on_progress) options.on_progress({done, jobs.size(), results[i].id, results[i].status});
  };

  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < leaders.size();) {
      size_t i = leaders[k];
      try {
        results[i] = build_one(jobs[i], keys[i], cache_dir, options);
      } catch (const std::exception& e) {  // never let one candidate stop the batch
        results[i] = BuildResult{};
        results[i].id = jobs[i].id;
        results[i].cache_key = keys[i];
        results[i].exit_code = -1;
        results[i].diagnostics = std::string("internal error while building: ") + e.what();
      }
      report(i);
      auto group = followers.find(i);  // find, not [], since other workers read the map too
      for (size_t f : group == followers.end() ? std::vector<size_t>{} : group->second) {
        results[f] = results[i];
        results[f].id = jobs[f].id;
        results[f].seconds = 0;
        if (results[f].ok()) results[f].status = BuildStatus::cached;
        note_kernel_build(jobs[f].id, false);
        report(f);
      }
    }
  };

  unsigned workers = options.workers ? options.workers : std::max(1u, std::thread::hardware_concurrency());
  workers = static_cast<unsigned>(std::min<size_t>(workers, leaders.size()));
  std::vector<std::thread> pool;
  for (unsigned w = 1; w < workers; ++w) pool.emplace_back(work);
  if (workers > 0) work();  // the calling thread is one of the workers
  for (auto& t : pool) t.join();
  return results;
}

}  // namespace fact
