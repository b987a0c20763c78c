#include "core/python_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/paths.h"
#include "core/process_counts.h"

extern char** environ;

namespace fact {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The last few non-empty lines of a file, joined by " | " (a dead worker's last words).
std::string last_lines(const fs::path& path, size_t max_lines = 6, size_t max_chars = 1500) {
  std::istringstream in(read_all(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) lines.push_back(line);
  std::string out;
  for (size_t i = lines.size() > max_lines ? lines.size() - max_lines : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : " | ") + lines[i];
  return out.size() > max_chars ? out.substr(out.size() - max_chars) : out;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const char* name = sigdescr_np(WTERMSIG(status));
    return fmt::format("killed by signal {} ({})", WTERMSIG(status), name ? name : "?");
  }
  if (WIFEXITED(status)) return fmt::format("exit code {}", WEXITSTATUS(status));
  return "ended";
}

std::string command_line(const std::string& module, const std::vector<std::string>& args) {
  std::string s = "python -m " + module;
  for (const auto& a : args) s += " " + a;
  return s.size() > 300 ? s.substr(0, 300) + " ..." : s;
}

std::vector<std::string> environment_with(const std::map<std::string, std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos && extra.count(kv.substr(0, eq))) continue;
    env.push_back(kv);
  }
  for (const auto& [k, v] : extra) env.push_back(k + "=" + v);
  return env;
}

}  // namespace

struct PythonWorker::Impl {
  PythonWorkerOptions options;
  mutable std::mutex mutex;
  fs::path scratch;
  pid_t pid = -1;
  int to_worker = -1, from_worker = -1;
  std::string buffer;  // what was read from the worker past the last full line
  fs::path stderr_file;
  long long next_id = 1;
  int started = 0;
  std::vector<std::string> deaths;

  bool running() const { return pid > 0; }

  // Reads one line from the worker before the deadline (none when `unlimited`); false at its end or the deadline.
  bool read_line(std::string& line, std::chrono::steady_clock::time_point deadline, bool unlimited, bool& timed_out) {
    timed_out = false;
    for (;;) {
      if (auto nl = buffer.find('\n'); nl != std::string::npos) {
        line = buffer.substr(0, nl);
        buffer.erase(0, nl + 1);
        return true;
      }
      int wait_ms = 1000;
      if (!unlimited) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
          timed_out = true;
          return false;
        }
        wait_ms = static_cast<int>(std::min<long long>(left.count(), 1000));
      }
      pollfd p{from_worker, POLLIN, 0};
      int n = poll(&p, 1, wait_ms);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) continue;
      char chunk[65536];
      ssize_t got = read(from_worker, chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      buffer.append(chunk, static_cast<size_t>(got));
    }
  }

  bool write_all(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      ssize_t n = write(to_worker, text.data() + done, text.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Ends the worker: its stdin closes (it exits by itself), or, with `kill`, its process group is killed.
  // Returns its wait status.
  int stop(bool kill_now) {
    int status = 0;
    if (!running()) return status;
    if (to_worker >= 0) close(to_worker);
    to_worker = -1;
    bool reaped = false;
    if (!kill_now) {
      for (int i = 0; i < 100 && !reaped; ++i) {  // up to 5 s to finish on its own
        if (waitpid(pid, &status, WNOHANG) == pid) reaped = true;
        else usleep(50 * 1000);
      }
    }
    if (!reaped) {
      ::kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    if (from_worker >= 0) close(from_worker);
    from_worker = -1;
    buffer.clear();
    pid = -1;
    return status;
  }

  // Starts a worker and waits for its "ready" line; returns "" or why it could not start.
  std::string start() {
    static std::once_flag ignore_sigpipe;
    // A worker that died leaves a pipe without a reader: writing to it must fail, not kill `fact`.
    std::call_once(ignore_sigpipe, [] { signal(SIGPIPE, SIG_IGN); });
    std::error_code ec;
    fs::create_directories(scratch, ec);
    stderr_file = scratch / fmt::format("worker-{}.stderr", started + 1);
    std::vector<std::string> argv = options.argv;
    if (argv.empty()) argv = {python_exe(), "-m", "fact.worker"};
    std::map<std::string, std::string> extra = options.env;
    if (extra.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      extra["PYTHONPATH"] = python_dir().string() + (old && *old ? ":" + std::string(old) : "");
    }
    int in_pipe[2], out_pipe[2];
    if (pipe(in_pipe) != 0) return std::string("pipe failed: ") + std::strerror(errno);
    if (pipe(out_pipe) != 0) {
      close(in_pipe[0]);
      close(in_pipe[1]);
      return std::string("pipe failed: ") + std::strerror(errno);
    }
    fcntl(in_pipe[1], F_SETFD, FD_CLOEXEC);
    fcntl(out_pipe[0], F_SETFD, FD_CLOEXEC);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in_pipe[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addclose(&actions, in_pipe[0]);
    posix_spawn_file_actions_addclose(&actions, out_pipe[1]);
    // Its own process group, so a time-out also stops what it started (a measuring child).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    auto env_strings = environment_with(extra);
    std::vector<char*> envp, args;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    for (auto& s : argv) args.push_back(s.data());
    args.push_back(nullptr);
    pid_t child = -1;
    int rc = posix_spawnp(&child, args[0], &actions, &attr, args.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(in_pipe[0]);
    close(out_pipe[1]);
    if (rc != 0) {
      close(in_pipe[1]);
      close(out_pipe[0]);
      return fmt::format("cannot start '{}': {}", argv[0], std::strerror(rc));
    }
    pid = child;
    to_worker = in_pipe[1];
    from_worker = out_pipe[0];
    ++started;
    note_python_start("fact.worker");
    std::string line;
    bool timed_out = false;
    auto deadline = std::chrono::steady_clock::now() + options.startup_timeout;
    while (read_line(line, deadline, false, timed_out)) {
      try {
        if (json::parse(line).value("ready", false)) return "";
      } catch (const json::exception&) {  // a stray line before the protocol starts: not ours
      }
    }
    int status = stop(true);
    return fmt::format("the Python worker ({}) did not start: {}; its stderr: {}", fmt::join(argv, " "),
                       timed_out ? fmt::format("no answer in {} s", options.startup_timeout.count()) : describe_status(status),
                       last_lines(stderr_file));
  }

  ProcessResult one_shot(const std::string& module, const std::vector<std::string>& args,
                         std::chrono::seconds timeout) {
    std::vector<std::string> argv = options.one_shot_argv;
    if (argv.empty()) argv = {python_exe(), "-m"};
    argv.push_back(module);
    argv.insert(argv.end(), args.begin(), args.end());
    ProcessOptions po;
    po.env = options.env;
    if (po.env.empty()) {
      const char* old = std::getenv("PYTHONPATH");
      po.env["PYTHONPATH"] = python_dir().string() + (old && *old ? ":" + std::string(old) : "");
    }
    po.timeout = timeout;
    if (options.one_shot_argv.size() >= 1 && options.one_shot_argv[0] != python_exe())
      note_python_start(module);  // run_process counts python_exe() itself
    return run_process(argv, po);
  }

  // A worker that ended between requests (nothing asked it to) counts as a death; the request goes to a fresh one.
  void reap_if_ended() {
    int status = 0;
    if (!running() || waitpid(pid, &status, WNOHANG) != pid) return;
    pid = -1;  // reaped: stop() must not wait for it again
    close(to_worker);
    close(from_worker);
    to_worker = from_worker = -1;
    buffer.clear();
    deaths.push_back(fmt::format("the Python worker ended between requests ({}); its stderr: {}",
                                 describe_status(status), last_lines(stderr_file)));
  }

  ProcessResult request(const std::string& module, const std::vector<std::string>& args, std::chrono::seconds timeout) {
    reap_if_ended();
    if (!running()) {
      if (static_cast<int>(deaths.size()) > options.restarts) return one_shot(module, args, timeout);
      if (std::string why = start(); !why.empty()) {
        deaths.push_back(why);
        if (static_cast<int>(deaths.size()) > options.restarts) return one_shot(module, args, timeout);
        if (why = start(); !why.empty()) {
          deaths.push_back(why);
          return one_shot(module, args, timeout);
        }
      }
    }
    long long id = next_id++;
    fs::path out_file = scratch / fmt::format("request-{}.out", id), err_file = scratch / fmt::format("request-{}.err", id);
    json req = {{"id", id}, {"module", module}, {"argv", args}, {"stdout", out_file.string()},
                {"stderr", err_file.string()}};
    ProcessResult r;
    auto take_output = [&] {
      r.out = read_all(out_file);
      r.err = read_all(err_file);
      std::error_code ec;
      fs::remove(out_file, ec);
      fs::remove(err_file, ec);
    };
    bool sent = write_all(req.dump() + "\n");
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string line;
    bool timed_out = false;
    while (sent && read_line(line, deadline, timeout.count() == 0, timed_out)) {
      json reply;
      try {
        reply = json::parse(line);
      } catch (const json::exception&) {
        continue;
      }
      if (!reply.contains("id") || reply["id"] != id) continue;
      take_output();
      r.exit_code = reply.value("exit_code", 1);
      if (reply.contains("error") && reply["error"].is_string())
        r.err += (r.err.empty() ? "" : "\n") + reply["error"].get<std::string>();
      if (reply.contains("python_children") && reply["python_children"].is_object())
        for (const auto& [use, n] : reply["python_children"].items())
          if (n.is_number_integer()) note_python_start(use, n.get<int>());
      // The request left the worker's CUDA context unusable: it exits by itself; the next request starts another.
      if (reply.value("restart", false)) stop(false);
      return r;
    }
    // The worker died, or ran past the time limit: this request fails, the next gets a fresh worker.
    int status = stop(true);
    take_output();
    r.timed_out = timed_out;
    r.exit_code = -1;
    r.signal = WIFSIGNALED(status) && !timed_out ? WTERMSIG(status) : 0;
    std::string why = timed_out ? fmt::format("stopped after {} s (the time limit)", timeout.count())
                      : sent    ? describe_status(status)
                                : "it had already ended (" + describe_status(status) + ") when the request was sent";
    std::string last = last_lines(stderr_file);
    std::string death = fmt::format("the Python worker died during request {} ({}): {}{}", id,
                                    command_line(module, args), why, last.empty() ? "" : "; its stderr: " + last);
    deaths.push_back(death);
    bool again = static_cast<int>(deaths.size()) <= options.restarts;
    r.err += (r.err.empty() || r.err.back() == '\n' ? "" : "\n") + death +
             (again ? "; the next request starts a fresh worker\n"
                    : "; further requests each start a Python of their own\n");
    return r;
  }
};

PythonWorker::PythonWorker(PythonWorkerOptions options) : impl_(std::make_unique<Impl>()) {
  static std::atomic<int> counter{0};
  impl_->options = std::move(options);
  impl_->scratch = fs::temp_directory_path() / fmt::format("fact-python-worker-{}-{}", getpid(), counter++);
}

PythonWorker::~PythonWorker() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->stop(false);
  std::error_code ec;
  fs::remove_all(impl_->scratch, ec);
}

ProcessResult PythonWorker::run_module(const std::string& module, const std::vector<std::string>& args,
                                       std::chrono::seconds timeout) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->request(module, args, timeout);
}

int PythonWorker::starts() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->started;
}

std::vector<std::string> PythonWorker::deaths() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->deaths;
}

PythonWorker& python_worker() {
  static PythonWorker worker;
  return worker;
}

ProcessResult run_python_module(const std::string& module, const std::vector<std::string>& args,
                                std::chrono::seconds timeout) {
  return python_worker().run_module(module, args, timeout);
}

}  // namespace fact
