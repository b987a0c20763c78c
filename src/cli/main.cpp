// `fact`: the command-line front of the pipeline (cli_main.cpp).
#include "cli/command.h"

int main(int argc, char** argv) { return fact::cli::run(argc, argv); }
