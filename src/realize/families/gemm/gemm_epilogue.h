#pragma once
// A GEMM's epilogue: its tree, and its name when the tree is one of data/epilogues/named.json's predefined
// ones ("bias_relu", ...). Problems, configs, tuning records and reports store the name for a named tree
// (so ids and keys of those stay as they were) and the tree's compact JSON for any other.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "realize/families/gemm/epilogue_tree.h"

namespace fact::realize {

struct Epilogue {
  EpilogueTree tree = named_tree("none");
  std::string name = "none";  // "" for a tree that is not a predefined one

  // The predefined epilogue of that name; Error listing the names.
  static Epilogue named(const std::string& name);
  // The epilogue computing `tree`, named when the tree equals a predefined one.
  static Epilogue of(EpilogueTree tree);
  // The name, or for an unnamed tree its canonical text (EpilogueTree::text).
  std::string key() const { return name.empty() ? tree.text() : name; }
  // The name as a string, or the tree's compact JSON; from_json takes either.
  nlohmann::json to_json() const;
  static Epilogue from_json(const nlohmann::json& j);

  friend bool operator==(const Epilogue& a, const Epilogue& b) { return a.key() == b.key(); }

  static EpilogueTree named_tree(const std::string& name);
  static std::vector<std::string> names();  // the predefined names, in the data file's order
};

std::string to_string(const Epilogue& e);  // key()
// A predefined name ("bias_relu"); throws Error naming the bad text and listing the accepted names.
Epilogue epilogue_from_string(const std::string& s);

// Whether the kernel reads the bias vector (a row or column broadcast of the bias slot; vec<i> slots are not it).
bool has_bias(const Epilogue& e);
// Whether the kernel reads a tensor shaped like D through FactGemmArgs::residual (a residual, SwiGLU's U).
bool has_residual(const Epilogue& e);
// The manifest's view of the epilogue, for readers without FACT (the CPU reference op): the tree's compact
// JSON under "epilogue_tree" and its activations' table entries under "activations".
nlohmann::json epilogue_reference_json(const Epilogue& e);

}  // namespace fact::realize
