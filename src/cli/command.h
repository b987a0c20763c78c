#pragma once
// Each `fact` subcommand lives in its own cmd_*.cpp and registers itself here at start-up, so adding
// a command touches no other file.
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace fact::cli {

using Setup = std::function<void(CLI::App& app)>;

// Returns true so it can initialise a static: `static bool reg = register_command("discover", setup);`
bool register_command(const std::string& name, Setup setup);
const std::vector<std::pair<std::string, Setup>>& registered_commands();

// Parses argv and runs the subcommand: the exit status (1 for an Error, 3 for a bug; never an exception).
int run(int argc, char** argv);

}  // namespace fact::cli
