#pragma once
// The problems of a suite folder in KernelBench's layout: DIR/level1/NAME.py, DIR/level2/NAME.py, ...
// Each file defines class Model, get_inputs() and get_init_inputs(); anything else is an Error.
#include <filesystem>
#include <string>
#include <vector>

namespace fact::bench {

struct SuiteProblem {
  std::string level;             // the level folder's name, e.g. "level1"
  int level_number = 0;          // 1 for "level1"
  std::string name;              // the file's stem, e.g. "standard_matmul"
  std::filesystem::path path;
  std::string id() const { return level + "/" + name; }
};

// What a file lacks to be a problem ("no `class Model`", ...), or empty when it is one. A text check, so
// finding a suite costs no Python start; a file that passes and still fails to import fails in its run.
std::string problem_file_defect(const std::string& source);

// DIR holding level folders (levelN), or one level folder itself. Problems come sorted by level number,
// then by name with leading numbers compared as numbers (KernelBench's "2_x" before "10_y"). Throws Error
// naming every file that is not a problem, or the folder when it holds none.
std::vector<SuiteProblem> find_problems(const std::filesystem::path& dir);

}  // namespace fact::bench
