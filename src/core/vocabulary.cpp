#include "core/vocabulary.h"

#include <nlohmann/json.hpp>

#include "core/enum_names.h"

namespace fact {
namespace {

// Name tables: the single place where each word meets its text form.
constexpr EnumNames<Numerics, 5> kNumerics{{{Numerics::fp32, "fp32"}, {Numerics::tf32, "tf32"},
                                            {Numerics::x3tf32, "3xtf32"}, {Numerics::bf16, "bf16"},
                                            {Numerics::fp16, "fp16"}}};
constexpr EnumNames<Arch, 2> kArchs{{{Arch::sm80, "sm80"}, {Arch::sm90, "sm90"}}};
constexpr EnumNames<MatrixLayout, 2> kLayouts{{{MatrixLayout::row, "row"}, {MatrixLayout::column, "column"}}};
constexpr EnumNames<Element, 3> kElements{
    {{Element::f32, "float32"}, {Element::bf16, "bfloat16"}, {Element::f16, "float16"}}};

}  // namespace

std::string to_string(Numerics v) { return enum_name(kNumerics, v); }
std::string to_string(Arch v) { return enum_name(kArchs, v); }
std::string to_string(MatrixLayout v) { return enum_name(kLayouts, v); }
std::string to_string(Element v) { return enum_name(kElements, v); }
Numerics numerics_from_string(const std::string& s) { return parse_enum(kNumerics, s, "numerics mode"); }
Arch arch_from_string(const std::string& s) { return parse_enum(kArchs, s, "arch"); }
MatrixLayout matrix_layout_from_string(const std::string& s) { return parse_enum(kLayouts, s, "matrix layout"); }
Element element_from_string(const std::string& s) { return parse_enum(kElements, s, "element type"); }
void to_json(nlohmann::json& j, Numerics v) { j = to_string(v); }
void to_json(nlohmann::json& j, Arch v) { j = to_string(v); }
void to_json(nlohmann::json& j, MatrixLayout v) { j = to_string(v); }
void to_json(nlohmann::json& j, Element v) { j = to_string(v); }
void from_json(const nlohmann::json& j, Numerics& v) { v = numerics_from_string(j.get<std::string>()); }
void from_json(const nlohmann::json& j, Arch& v) { v = arch_from_string(j.get<std::string>()); }
void from_json(const nlohmann::json& j, MatrixLayout& v) { v = matrix_layout_from_string(j.get<std::string>()); }
void from_json(const nlohmann::json& j, Element& v) { v = element_from_string(j.get<std::string>()); }
std::vector<std::string> numerics_names() { return enum_names(kNumerics); }
std::vector<std::string> arch_names() { return enum_names(kArchs); }

int element_bytes(Element e) { return e == Element::f32 ? 4 : 2; }

std::string cutlass_type(Element e) {
  return e == Element::f32 ? "float" : e == Element::bf16 ? "cutlass::bfloat16_t" : "cutlass::half_t";
}

std::string torch_scalar_type(Element e) {
  return e == Element::f32 ? "at::kFloat" : e == Element::bf16 ? "at::kBFloat16" : "at::kHalf";
}

Element input_element(Numerics n) {
  switch (n) {
    case Numerics::bf16: return Element::bf16;
    case Numerics::fp16: return Element::f16;
    default: return Element::f32;
  }
}

Numerics baseline_numerics(Numerics n) { return n == Numerics::x3tf32 ? Numerics::fp32 : n; }

std::vector<std::string> conv_numerics_names() { return {to_string(Numerics::tf32), to_string(Numerics::x3tf32)}; }

Numerics convolution_numerics(Numerics numerics, Numerics conv) {
  return numerics == Numerics::x3tf32 || numerics == Numerics::fp32 ? conv : numerics;
}

}  // namespace fact
