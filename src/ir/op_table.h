#pragma once
// The ATen ops FACT's IR knows (data/ir/aten_ops.json): category and algebraic properties, used by
// validation (unknown op -> error), the matcher (commutativity) and the cost model (category).
#include <filesystem>
#include <map>
#include <string>

namespace fact::ir {

enum class OpCategory { Gemm, Attention, Elementwise, Reduction, Normalization, Softmax, View, Copy, Other };

struct OpInfo {
  std::string name;
  OpCategory category = OpCategory::Other;
  bool commutative = false;  // binary op whose first two args may be swapped
  bool reshape = false;      // a view that keeps the elements' row-major order (view, reshape, flatten): only the shape changes
  bool channels_last = false;  // reads a channels-last tensor as it is and writes channels-last (cuDNN's conv2d, pooling)
};

class OpTable {
 public:
  static OpTable load(const std::filesystem::path& path);  // throws Error on a malformed file
  static const OpTable& builtin();                          // data_dir()/ir/aten_ops.json, loaded once
  const OpInfo* find(const std::string& op) const;          // nullptr if unknown
  size_t size() const { return ops_.size(); }
 private:
  std::map<std::string, OpInfo> ops_;
};

OpCategory parse_op_category(const std::string& s);  // throws Error on an unknown name
const char* to_string(OpCategory c);

}  // namespace fact::ir
