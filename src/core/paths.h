#pragma once
// Where FACT finds its data, templates, Python and CUTLASS; each overridable by an environment variable.
#include <filesystem>
#include <string>

namespace fact {

std::filesystem::path fact_home();       // $FACT_HOME, else the source tree this binary was built from
std::filesystem::path data_dir();        // fact_home()/data
std::filesystem::path templates_dir();   // fact_home()/templates
std::filesystem::path python_dir();      // $FACT_PYTHON_DIR, else fact_home()/python (holds the `fact` package)
std::string python_exe();                // $FACT_PYTHON, else the venv configured at build time
// CUTLASS source root (has include/cutlass, include/cute, tools/util/include, examples):
// $CUTLASS_DIR, else located through the installed `cutlass_library` wheel. Throws Error if neither.
std::filesystem::path cutlass_dir();

}  // namespace fact
