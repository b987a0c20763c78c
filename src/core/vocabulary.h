#pragma once
// The words every stage shares: numerics mode, target architecture, element type, matrix layout. Discover
// writes them into the plan, realize reads them, compose reports them; each has one text form (its name
// in plans, rules, tuning records and kernels), parsed and printed here only.
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace fact {

// How a kernel does its arithmetic. fp32/tf32/3xtf32 take and return float32 tensors; bf16/fp16 take
// and return tensors of that type (accumulating in fp32). 3xtf32 keeps fp32 accuracy on tensor cores.
enum class Numerics { fp32, tf32, x3tf32, bf16, fp16 };
// A target architecture; its figures are data/arch/<name>.json (core/arch_spec.h).
enum class Arch { sm80, sm90 };
// CUTLASS's layout::RowMajor / layout::ColumnMajor of an operand as a matrix (A: MxK, B: KxN, D: MxN).
enum class MatrixLayout { row, column };
// Element types by their torch names: float32, bfloat16, float16.
enum class Element { f32, bf16, f16 };

std::string to_string(Numerics v);      // "fp32", "tf32", "3xtf32", "bf16", "fp16"
std::string to_string(Arch v);          // "sm80", "sm90"
std::string to_string(MatrixLayout v);  // "row", "column"
std::string to_string(Element v);       // "float32", "bfloat16", "float16"
// Parsers throw Error naming the bad text and listing the accepted names.
Numerics numerics_from_string(const std::string& s);
Arch arch_from_string(const std::string& s);
MatrixLayout matrix_layout_from_string(const std::string& s);
Element element_from_string(const std::string& s);
// In JSON each word is its name (nlohmann would write an enum as its number); reading one parses the name.
void to_json(nlohmann::json& j, Numerics v);
void to_json(nlohmann::json& j, Arch v);
void to_json(nlohmann::json& j, MatrixLayout v);
void to_json(nlohmann::json& j, Element v);
void from_json(const nlohmann::json& j, Numerics& v);
void from_json(const nlohmann::json& j, Arch& v);
void from_json(const nlohmann::json& j, MatrixLayout& v);
void from_json(const nlohmann::json& j, Element& v);
// Every name, for command-line checks.
std::vector<std::string> numerics_names();
std::vector<std::string> arch_names();
// What an fp32 model's convolutions may run in (--conv-numerics): tf32, PyTorch's cuDNN default, or 3xtf32.
std::vector<std::string> conv_numerics_names();

int element_bytes(Element e);
std::string cutlass_type(Element e);       // the C++ type in kernels: "float", "cutlass::bfloat16_t", "cutlass::half_t"
std::string torch_scalar_type(Element e);  // the c10::ScalarType constant in op wrappers: "at::kFloat", ...
Element input_element(Numerics n);         // what a kernel's inputs hold in that mode
// The mode PyTorch's own fp32 matmuls run in for a FACT mode: fp32 for fp32/3xtf32, else the mode itself.
Numerics baseline_numerics(Numerics n);
// What a convolution runs in under a plan in `numerics` whose conv numerics are `conv`: an fp32-accurate plan's
// convolutions take `conv` (PyTorch keeps cudnn.allow_tf32 apart from the matmuls' precision), others the plan's.
Numerics convolution_numerics(Numerics numerics, Numerics conv);

}  // namespace fact
