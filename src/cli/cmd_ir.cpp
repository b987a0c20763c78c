// `fact ir print IR.json`: validates an IR file and prints it one node a line.
#include <iostream>
#include <memory>
#include <string>

#include "cli/command.h"
#include "ir/ir_io.h"
#include "ir/op_table.h"

namespace fact::cli {

static void setup_ir(CLI::App& app) {
  auto* ir = app.add_subcommand("ir", "inspect FACT IR files (written by python -m fact.trace)");
  ir->require_subcommand(1);
  auto* print = ir->add_subcommand("print", "validate an IR file and print it: name = op(args) : dtype[shape]");
  auto path = std::make_shared<std::string>();
  print->add_option("ir", *path, "IR JSON file")->required();
  print->callback([path] {
    auto graph = ir::load_graph(*path, ir::OpTable::builtin());
    std::cout << ir::format_graph(graph);
  });
}

static bool registered = register_command("ir", setup_ir);

}  // namespace fact::cli
