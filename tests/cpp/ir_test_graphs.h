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

// Hugging Face's LlamaRMSNorm of a bf16 tensor: h.to(`upcast`), the norm in that dtype, .to(bf16) (`downcast`), then
// weight * it; `add`: h is the residual sum x + y (read again after the norm), else h is x. torch.export writes the
// casts as aten.to.dtype.
inline GraphDoc hf_rms_norm(const std::string& upcast, bool downcast, bool add) {
  const std::vector<int64_t> s{4, 32, 768}, r{4, 32, 1};
  const std::string bf = "bfloat16";
  GraphDoc d;
  d.input("x", s, bf).input("y", s, bf).input("w", {768}, bf, "parameter");
  if (add) d.op("h", "aten.add.Tensor", {ref_to("x"), ref_to("y")}, s, bf);
  d.op("h32", "aten.to.dtype", {ref_to(add ? "h" : "x"), {{"dtype", upcast}}}, s, upcast);
  d.op("sq", "aten.pow.Tensor_Scalar", {ref_to("h32"), 2}, s, upcast);
  d.op("ms", "aten.mean.dim", {ref_to("sq"), {-1}, true}, r, upcast);
  d.op("ve", "aten.add.Tensor", {ref_to("ms"), 1e-5}, r, upcast);
  d.op("rs", "aten.rsqrt.default", {ref_to("ve")}, r, upcast);
  d.op("nm", "aten.mul.Tensor", {ref_to("h32"), ref_to("rs")}, s, upcast);
  if (downcast) d.op("nm16", "aten.to.dtype", {ref_to("nm"), {{"dtype", bf}}}, s, bf);
  d.op("out", "aten.mul.Tensor", {ref_to("w"), ref_to(downcast ? "nm16" : "nm")}, s, downcast ? bf : upcast);
  d.output("out");
  if (add) d.op("next", "aten.add.Tensor", {ref_to("h"), ref_to("out")}, s, bf).output("next");
  return d;
}

}  // namespace fact::test
