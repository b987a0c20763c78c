#include "discover/tracer.h"

#include "core/error.h"
#include "core/paths.h"
#include "core/python_worker.h"
#include "ir/ir_io.h"

namespace fact::discover {
namespace fs = std::filesystem;

static std::string last_lines(const std::string& text, size_t max_lines) {
  size_t pos = text.size(), lines = 0;
  while (pos > 0 && lines <= max_lines) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
    ++lines;
  }
  return text.substr(pos + 1);
}

ir::Graph trace_module(const fs::path& model_file, const fs::path& ir_out, const ir::OpTable& ops) {
  if (!fs::exists(model_file)) throw Error("model file '" + model_file.string() + "' does not exist");
  std::string py = python_exe();
  if (!fs::exists(py))
    throw Error("the Python with torch is missing at '" + py + "': run scripts/bootstrap or set FACT_PYTHON");
  fs::remove(ir_out);
  // fact.trace behind its cache: a problem file traced before (same bytes, tracer and torch) costs no trace.
  auto r = run_python_module("fact.trace_cache", {fs::absolute(model_file).string(), "-o", fs::absolute(ir_out).string()},
                             std::chrono::seconds(900));
  if (r.timed_out) throw Error("tracing '" + model_file.string() + "' took longer than 900 s and was stopped");
  if (r.exit_code != 0) {
    fs::remove(ir_out);
    // The tracer reports bad input as one line "fact-trace: error: <message>".
    const std::string prefix = "fact-trace: error: ";
    std::string msg;
    if (auto p = r.err.rfind(prefix); p != std::string::npos) msg = r.err.substr(p + prefix.size());
    if (auto nl = msg.find('\n'); nl != std::string::npos) msg.resize(nl);
    if (r.exit_code == 2 && !msg.empty()) throw Error(msg);
    throw Error("the tracer failed on '" + model_file.string() + "' (exit " + std::to_string(r.exit_code) +
                "): " + last_lines(r.err, 8));
  }
  try {
    return ir::load_graph(ir_out, ops);
  } catch (...) {
    fs::remove(ir_out);  // no partial or invalid output survives
    throw;
  }
}

}  // namespace fact::discover
