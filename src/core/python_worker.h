#pragma once
// The client of a `fact` process's one long-lived Python (python -m fact.worker, python/fact/worker.py). Each
// request runs a FACT Python module's main(argv) as `python -m MODULE ARGS...` would, without starting Python and
// importing torch again (seconds each time): tracing, the CUDA check, measuring, the op library build, the
// end-to-end check and the chart share one Python. JSON lines over the worker's stdin and stdout; a module's
// output comes back through files, so it cannot corrupt the protocol.
//
// A worker that dies during a request (a kernel that crashed it, a time-out) fails that request only, with a
// message naming the request and the worker's last stderr lines; the next request starts a fresh worker, once.
// After a second death every request runs in a `python -m` process of its own, as before the worker existed.
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/process.h"

namespace fact {

struct PythonWorkerOptions {
  std::vector<std::string> argv;           // the worker; empty: {python_exe(), "-m", "fact.worker"}
  std::vector<std::string> one_shot_argv;  // prefix of a one-shot run (+ module + args); empty: {python_exe(), "-m"}
  std::map<std::string, std::string> env;  // added to the inherited environment; empty: PYTHONPATH = python_dir()
  int restarts = 1;                        // fresh workers after deaths, before falling back to one-shot runs
  std::chrono::seconds startup_timeout{120};
};

class PythonWorker {
 public:
  explicit PythonWorker(PythonWorkerOptions options = {});
  ~PythonWorker();  // ends the worker (end of its stdin) and removes its scratch folder
  PythonWorker(const PythonWorker&) = delete;
  PythonWorker& operator=(const PythonWorker&) = delete;

  // `python -m module args...` in the worker, started on the first request. exit_code, signal, timed_out, out and
  // err as run_process gives them (a dead worker reads as a killed child). timeout 0: no limit. Never throws for
  // what the module does; throws Error only when no Python can be started at all.
  ProcessResult run_module(const std::string& module, const std::vector<std::string>& args,
                           std::chrono::seconds timeout = std::chrono::seconds(0));

  int starts() const;                       // workers started so far
  std::vector<std::string> deaths() const;  // one line per worker that died: the request that killed it, and how

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The process's worker (default options), started on its first request and ended when the process exits.
PythonWorker& python_worker();
// python_worker().run_module(...): how FACT's C++ runs its Python modules.
ProcessResult run_python_module(const std::string& module, const std::vector<std::string>& args,
                                std::chrono::seconds timeout = std::chrono::seconds(0));

}  // namespace fact
