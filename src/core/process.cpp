#include "core/process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.h"
#include "core/paths.h"
#include "core/process_counts.h"

extern char** environ;

namespace fact {

namespace {

// Tallies the start of Python (by the module it runs) or of `fact` itself, for report.json's "process" block.
void note_start(const std::vector<std::string>& argv) {
  if (argv[0] == python_exe()) {
    std::string use = "python";
    for (size_t i = 1; i + 1 < argv.size(); ++i)
      if (argv[i] == "-m" || argv[i] == "-c") {
        use = argv[i] == "-m" ? argv[i + 1] : "python -c";
        break;
      }
    note_python_start(use);
    return;
  }
  std::error_code ec;
  static const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!self.empty() && argv[0] == self.string()) note_fact_start();
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const ProcessOptions& options) {
  if (argv.empty()) throw Error("run_process: empty command");
  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) throw Error(std::string("pipe failed: ") + std::strerror(errno));

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], 2);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  posix_spawn_file_actions_addclose(&actions, err_pipe[0]);
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, options.cwd.c_str());

  // Environment: inherited, with options.env overriding.
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string::npos && options.env.count(kv.substr(0, eq))) continue;
    env_strings.push_back(kv);
  }
  for (auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args_copy(argv);
  std::vector<char*> args;
  for (auto& s : args_copy) args.push_back(s.data());
  args.push_back(nullptr);

  // The child leads its own process group so a time-out also stops what it started (nvcc's cicc, ptxas).
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(out_pipe[1]);
  close(err_pipe[1]);
  if (rc != 0) {
    close(out_pipe[0]);
    close(err_pipe[0]);
    throw Error("cannot start '" + argv[0] + "': " + std::strerror(rc));
  }
  note_start(argv);

  ProcessResult result;
  auto deadline = std::chrono::steady_clock::now() + options.timeout;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.out, &result.err};
  int open_fds = 2;
  char buf[65536];
  // Something the child started and left running (a compile-worker pool, a daemon) can hold the pipes open long
  // after the child exited: once it has, the output gets a short grace to drain, then what is left of its
  // process group is stopped and the pipes are let go.
  constexpr auto kDrainGrace = std::chrono::seconds(2);
  int status = 0;
  bool exited = false;
  auto drain_until = std::chrono::steady_clock::time_point::max();
  while (open_fds > 0) {
    int wait_ms = 200;
    auto now = std::chrono::steady_clock::now();
    if (options.timeout.count() > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now);
      if (left.count() <= 0 && !exited) {
        result.timed_out = true;
        kill(-pid, SIGKILL);
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(wait_ms, std::max<int64_t>(left.count(), 1)));
    }
    if (!exited && waitpid(pid, &status, WNOHANG) == pid) {
      exited = true;
      drain_until = now + kDrainGrace;
    }
    if (exited && now >= drain_until) {
      kill(-pid, SIGKILL);
      break;
    }
    int n = poll(fds, 2, wait_ms);
    if (n < 0 && errno == EINTR) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[i].fd, buf, sizeof buf);
      if (got > 0) {
        sinks[i]->append(buf, static_cast<size_t>(got));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  if (!exited) waitpid(pid, &status, 0);
  result.exit_code = (!result.timed_out && WIFEXITED(status)) ? WEXITSTATUS(status) : -1;
  result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return result;
}

}  // namespace fact
