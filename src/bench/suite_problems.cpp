#include "bench/suite_problems.h"

#include <algorithm>
#include <cctype>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/files.h"

namespace fs = std::filesystem;

namespace fact::bench {
namespace {

const char* kLayoutHint =
    "KernelBench layout: DIR/level1/NAME.py, DIR/level2/NAME.py, ..., each file defining class Model(nn.Module), "
    "get_inputs() and get_init_inputs()";

// "level12" -> 12; -1 for a folder that is not a level.
int level_number(const std::string& name) {
  if (name.size() <= 5 || name.rfind("level", 0) != 0) return -1;
  std::string digits = name.substr(5);
  if (!std::all_of(digits.begin(), digits.end(), [](unsigned char c) { return std::isdigit(c); })) return -1;
  return digits.size() > 6 ? -1 : std::stoi(digits);
}

bool starts_with_word(const std::string& line, const std::string& word) {
  if (line.rfind(word, 0) != 0) return false;
  char next = line.size() > word.size() ? line[word.size()] : '\0';
  return next == '(' || next == ':' || next == ' ';
}

// Natural order: a leading number compares as a number, so "2_relu" sorts before "10_gemm" and both before "relu".
bool natural_less(const std::string& a, const std::string& b) {
  auto lead = [](const std::string& s) {
    size_t n = 0;
    while (n < s.size() && n < 9 && std::isdigit(static_cast<unsigned char>(s[n]))) ++n;
    return n ? std::stol(s.substr(0, n)) : std::numeric_limits<long>::max();  // unnumbered after numbered
  };
  long la = lead(a), lb = lead(b);
  if (la != lb) return la < lb;
  return a < b;
}

void add_level(const fs::path& folder, int number, std::vector<SuiteProblem>& problems, std::vector<std::string>& bad) {
  for (const auto& entry : fs::directory_iterator(folder)) {
    const fs::path& p = entry.path();
    std::string file = p.filename().string();
    // Python's own files (__init__.py) and hidden files are not problems; neither is anything but .py.
    if (!entry.is_regular_file() || p.extension() != ".py" || file.rfind("__", 0) == 0 || file[0] == '.') continue;
    std::string defect = problem_file_defect(read_text_file(p, "problem file"));
    if (!defect.empty()) {
      bad.push_back(p.string() + ": " + defect);
      continue;
    }
    problems.push_back({folder.filename().string(), number, p.stem().string(), p});
  }
}

}  // namespace

std::string problem_file_defect(const std::string& source) {
  bool model = false, inputs = false, init_inputs = false;
  std::istringstream in(source);
  for (std::string line; std::getline(in, line);) {
    model = model || starts_with_word(line, "class Model");
    inputs = inputs || starts_with_word(line, "def get_inputs");
    init_inputs = init_inputs || starts_with_word(line, "def get_init_inputs");
  }
  std::vector<std::string> missing;
  if (!model) missing.push_back("`class Model`");
  if (!inputs) missing.push_back("`def get_inputs()`");
  if (!init_inputs) missing.push_back("`def get_init_inputs()`");
  if (missing.empty()) return "";
  std::string text = "not a problem file: no top-level ";
  for (size_t i = 0; i < missing.size(); ++i) text += (i ? (i + 1 == missing.size() ? " or " : ", ") : "") + missing[i];
  return text;
}

std::vector<SuiteProblem> find_problems(const fs::path& dir) {
  if (!fs::is_directory(dir))
    throw Error("suite folder '" + dir.string() + "' does not exist or is not a folder (" + kLayoutHint + ")");
  std::vector<SuiteProblem> problems;
  std::vector<std::string> bad;
  fs::path canonical = fs::weakly_canonical(dir);
  if (int own = level_number(canonical.filename().string()); own >= 0) {
    add_level(canonical, own, problems, bad);
  } else {
    for (const auto& entry : fs::directory_iterator(dir))
      if (int n = level_number(entry.path().filename().string()); n >= 0 && entry.is_directory())
        add_level(entry.path(), n, problems, bad);
  }
  if (!bad.empty()) {
    std::sort(bad.begin(), bad.end());
    std::string text = std::to_string(bad.size()) + " file(s) in suite folder '" + dir.string() +
                       "' are not KernelBench problems; add what is missing or move them out of the level folders:";
    for (const auto& b : bad) text += "\n  " + b;
    throw Error(text);
  }
  if (problems.empty())
    throw Error("suite folder '" + dir.string() + "' holds no problem files (" + kLayoutHint + ")");
  std::sort(problems.begin(), problems.end(), [](const SuiteProblem& a, const SuiteProblem& b) {
    if (a.level_number != b.level_number) return a.level_number < b.level_number;
    if (a.level != b.level) return a.level < b.level;
    return natural_less(a.name, b.name);
  });
  return problems;
}

}  // namespace fact::bench
