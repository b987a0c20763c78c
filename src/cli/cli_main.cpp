// The command line of the pipeline (discover -> realize -> compose): the `fact` program's main and the Python
// package's `fact` console script (fact._core.run_cli) both call run().
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>

#include "cli/command.h"
#include "core/error.h"

namespace fact::cli {

static std::vector<std::pair<std::string, Setup>>& commands() {
  static std::vector<std::pair<std::string, Setup>> list;
  return list;
}
bool register_command(const std::string& name, Setup setup) {
  commands().emplace_back(name, std::move(setup));
  return true;
}
const std::vector<std::pair<std::string, Setup>>& registered_commands() { return commands(); }

int run(int argc, char** argv) {
  CLI::App app{"FACT: turns a PyTorch module into a faster, verified module built from CUTLASS kernels"};
  app.set_version_flag("--version", FACT_VERSION);
  app.require_subcommand(1);
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log details");
  auto list = fact::cli::registered_commands();
  std::sort(list.begin(), list.end(), [](auto& a, auto& b) { return a.first < b.first; });
  try {
    // Inside the try: a command's setup reads data (the kernel families of data/families), which can be wrong.
    for (auto& [name, setup] : list) setup(app);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const fact::Error& e) {
    std::cerr << "fact: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    // A bug, not bad input: still one line and an exit code, never std::terminate.
    std::cerr << "fact: internal error (please report it): " << e.what() << "\n";
    return 3;
  }
  return 0;
}

}  // namespace fact::cli
