#pragma once
// Builds small IR documents in tests, so each test states its graph in a few lines.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/ir_io.h"
#include "ir/op_table.h"

namespace fact::test {

using Json = nlohmann::json;

// Not named `ref`: ADL would pick std::ref for a std::string argument.
inline Json ref_to(const std::string& name) { return {{"ref", name}}; }

class GraphDoc {
 public:
  GraphDoc() {
    doc_ = {{"format", "fact-ir"}, {"version", 1}, {"nodes", Json::array()}, {"outputs", Json::array()}};
  }
  // Row-major strides for a shape.
  static Json meta(const std::vector<int64_t>& shape, const std::string& dtype) {
    std::vector<int64_t> strides(shape.size());
    int64_t s = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = s;
      s *= shape[i];
    }
    return {{"shape", shape}, {"strides", strides}, {"dtype", dtype}};
  }
  GraphDoc& input(const std::string& name, const std::vector<int64_t>& shape, const std::string& dtype = "float32",
                  const std::string& kind = "input") {
    doc_["nodes"].push_back({{"name", name}, {"kind", kind}, {"target", name}, {"outputs", {meta(shape, dtype)}}});
    return *this;
  }
  GraphDoc& op(const std::string& name, const std::string& op, Json args, const std::vector<int64_t>& shape,
               const std::string& dtype = "float32", Json kwargs = Json::object()) {
    // `{ref_to(x)}` with one element may brace-initialize to the element itself; make it a list again.
    if (!args.is_array()) args = Json::array({args});
    doc_["nodes"].push_back({{"name", name}, {"kind", "op"}, {"op", op}, {"args", std::move(args)},
                             {"kwargs", std::move(kwargs)}, {"outputs", {meta(shape, dtype)}}});
    return *this;
  }
  GraphDoc& output(const std::string& name) {
    doc_["outputs"].push_back(ref_to(name));
    return *this;
  }
  Json& json() { return doc_; }
  ir::Graph graph() const { return ir::parse_graph(doc_, "test graph", ir::OpTable::builtin()); }

 private:
  Json doc_;
};

}  // namespace fact::test
