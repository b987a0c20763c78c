// fact._core: the pipeline for the Python package (python/fact/api): the command line (the `fact` console script),
// and `optimize` / `discover` as library calls in the caller's process, with their console lines handed to Python
// callables (a notebook shows neither C++'s std::cout nor its std::cerr). The GIL is released while a stage runs;
// the worker Python that traces and measures is a child process, as under the `fact` program.
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/error.h"
#include "core/vocabulary.h"
#include "discover/discover_stage.h"
#include "pipeline/optimize_pipeline.h"
#include "realize/template_renderer.h"

namespace nb = nanobind;

namespace {

// A stream whose complete lines go to a Python callable (None: dropped). The first exception the callable raises
// (a KeyboardInterrupt in the progress bar) is kept and raised once the call returns; later lines are dropped.
class PythonLines : public std::streambuf {
 public:
  explicit PythonLines(nb::object sink) : sink_(std::move(sink)) {}
  ~PythonLines() override { flush_line(); }
  void raise_pending() {
    flush_line();
    if (error_) {
      nb::gil_scoped_acquire gil;
      error_->restore();
      error_.reset();
      throw nb::python_error();
    }
  }

 protected:
  int overflow(int c) override {
    if (c == traits_type::eof()) return traits_type::not_eof(c);
    line_ += static_cast<char>(c);
    if (c == '\n' || c == '\r') flush_line();
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    for (std::streamsize i = 0; i < n; ++i) overflow(static_cast<unsigned char>(s[i]));
    return n;
  }
  int sync() override { return 0; }

 private:
  void flush_line() {
    if (line_.empty()) return;
    std::string line = std::move(line_);
    line_.clear();
    if (error_) return;
    nb::gil_scoped_acquire gil;
    if (sink_.is_none()) return;
    try {
      sink_(line);
    } catch (nb::python_error& e) {
      error_.emplace(std::move(e));
    }
  }
  nb::object sink_;
  std::string line_;
  std::optional<nb::python_error> error_;
};

// The values the CLI's option checks allow (CLI::IsMember), checked here for callers without the CLI.
void check_member(const char* option, const std::string& value, const std::vector<std::string>& allowed,
                  bool empty_ok) {
  if (empty_ok && value.empty()) return;
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw fact::Error(std::string(option) + "='" + value + "' is not one FACT knows: " + list);
}

// Runs `body(out, log)` without the GIL, its two streams going to the Python callables.
template <typename Body>
void with_python_streams(nb::object on_out, nb::object on_log, Body body) {
  PythonLines out_lines(std::move(on_out)), log_lines(std::move(on_log));
  {
    std::ostream out(&out_lines), log(&log_lines);
    nb::gil_scoped_release release;
    body(out, log);
    out.flush();
    log.flush();
  }
  out_lines.raise_pending();
  log_lines.raise_pending();
}

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "FACT's C++ pipeline (discover -> realize -> compose) in this process";
  m.attr("__version__") = FACT_VERSION;
  nb::exception<fact::Error>(m, "FactError");

  m.def(
      "run_cli",
      [](const std::vector<std::string>& argv) {
        std::vector<std::string> args = argv.empty() ? std::vector<std::string>{"fact"} : argv;
        std::vector<char*> pointers;
        for (auto& a : args) pointers.push_back(a.data());
        nb::gil_scoped_release release;
        return fact::cli::run(static_cast<int>(pointers.size()), pointers.data());
      },
      nb::arg("argv"), "Runs the `fact` command line (argv[0] is the program name); returns its exit status.");

  m.def("arch_names", &fact::arch_names, "The architectures FACT has specs and kernels for (sm80, sm90).");

  m.def(
      "render_template",
      [](const std::string& relative_path, const fact::realize::TemplateValues& values) {
        return fact::realize::render_template_file(relative_path, values);
      },
      nb::arg("relative_path"), nb::arg("values"),
      "A file of templates/ with its {{slots}} filled (every slot must get a value, every value a slot).");

  m.def(
      "optimize",
      [](const std::string& model, const std::string& out, const std::string& numerics, const std::string& arch,
         int top, const std::string& db, int tune_budget_s, bool compile_baselines, const std::string& agent,
         const std::string& endpoint, const std::string& llm_model, const std::string& conv_numerics,
         nb::object on_out, nb::object on_log) {
        check_member("numerics", numerics, fact::numerics_names(), true);
        check_member("conv_numerics", conv_numerics, fact::conv_numerics_names(), true);
        check_member("arch", arch, fact::arch_names(), false);
        fact::pipeline::OptimizeRequest request;
        request.model = model;
        request.out = out;
        request.numerics = numerics;
        request.conv_numerics = conv_numerics;
        request.arch = arch;
        request.top = top;
        request.db = db;
        request.tune_budget_s = tune_budget_s;
        request.no_compile = !compile_baselines;
        request.no_max_autotune = true;  // minutes of compiling per model: the CLI's --no-max-autotune, always here
        request.agent = agent;
        request.endpoint = endpoint;
        request.llm_model = llm_model;
        if (agent == "llm" && (endpoint.empty() || llm_model.empty()))
          throw fact::Error("agent='llm' needs endpoint=URL and llm_model=NAME (an OpenAI-compatible endpoint)");
        with_python_streams(std::move(on_out), std::move(on_log), [&](std::ostream& o, std::ostream& l) {
          fact::pipeline::optimize_model(request, o, l);
        });
      },
      nb::arg("model"), nb::arg("out"), nb::kw_only(), nb::arg("numerics") = "", nb::arg("arch") = "sm90",
      nb::arg("top") = 6, nb::arg("db") = "", nb::arg("tune_budget_s") = 0, nb::arg("compile_baselines") = false,
      nb::arg("agent") = "builtin", nb::arg("endpoint") = "", nb::arg("llm_model") = "", nb::arg("conv_numerics") = "",
      nb::arg("on_out") = nb::none(), nb::arg("on_log") = nb::none(),
      "`fact optimize MODEL --out OUT`: every stage; report.json, report.md and composed/ in OUT.");

  m.def(
      "discover",
      [](const std::string& model, const std::string& plan, const std::string& arch, const std::string& numerics,
         const std::string& conv_numerics, nb::object on_out, nb::object on_log) {
        check_member("numerics", numerics, fact::numerics_names(), true);
        check_member("conv_numerics", conv_numerics, fact::conv_numerics_names(), true);
        check_member("arch", arch, fact::arch_names(), false);
        fact::discover::DiscoverRequest request{model, arch, numerics, plan, {}, {}, conv_numerics};
        with_python_streams(std::move(on_out), std::move(on_log), [&](std::ostream& o, std::ostream& l) {
          fact::discover::discover_model(request, o, l);
        });
      },
      nb::arg("model"), nb::arg("plan"), nb::kw_only(), nb::arg("arch") = "sm90", nb::arg("numerics") = "",
      nb::arg("conv_numerics") = "", nb::arg("on_out") = nb::none(), nb::arg("on_log") = nb::none(),
      "`fact discover MODEL --json PLAN`: trace, match, rank; the plan table goes to on_out.");
}
