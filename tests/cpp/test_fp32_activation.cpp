// FACT's fp32-accurate epilogue activations (templates/cutlass/fp32_activation.hpp.in), on the host: the
// same text the fp32 / 3xtf32 kernels get, compiled here as plain C++ and compared with double-precision
// references over a sweep from tiny to large |x|, both signs. The device build uses CUDA's expf (<= 2 ulp)
// and erfcf (<= 4 ulp) where the host uses glibc's, so this checks the formulas; the bounds leave room.
#include <gtest/gtest.h>

#include <cfloat>
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/files.h"
#include "core/paths.h"
#include "realize/template_renderer.h"
#include "family_nvcc_check.h"

#include "../../templates/cutlass/fp32_activation.hpp.in"

namespace {

constexpr double kU = 0x1p-24;  // fp32 unit roundoff: half an ulp at 1
// Largest error allowed, in units of u * (1 + sensitivity): three ulp. Measured on the host: 2.3 (tanh-GELU),
// 1.8 (erf-GELU), 3.2 (SiLU); CUTLASS's cancelling tanh formula reaches 8.8e5.
constexpr double kMaxUnits = 6.0;

// 1 + tanh(t) through std::tanh in double; below t = -3, where it would cancel more than 8 of double's
// 53 bits, the same value as 2 e^2t / (1 + e^2t).
double one_plus_tanh(double t) { return t > -3 ? 1.0 + std::tanh(t) : 2 * std::exp(2 * t) / (1.0 + std::exp(2 * t)); }
double sigmoid(double z) { return 0.5 * one_plus_tanh(0.5 * z); }

double gelu_tanh_ref(double x) { return 0.5 * x * one_plus_tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)); }
double gelu_erf_ref(double x) {
  double w = x / std::sqrt(2.0);
  return w > -2 ? 0.5 * x * (1.0 + std::erf(w)) : 0.5 * x * std::erfc(-w);
}
double silu_ref(double x) { return x * sigmoid(x); }

// How much a relative rounding error of the activation's computed argument grows in the result: any fp32
// evaluation rounds that argument (and x itself already carries such an error from the accumulator).
double gelu_tanh_sensitivity(double x) {
  double z = 2 * std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x);
  return std::fabs(z) * (1.0 - sigmoid(z));
}
double gelu_erf_sensitivity(double x) {
  double w = -x / std::sqrt(2.0);
  return std::fabs(w) * 2.0 / std::sqrt(M_PI) * std::exp(-w * w) / std::erfc(w);
}

// Small and large magnitudes of both signs, and a fine grid over the range where the functions bend.
std::vector<float> sweep() {
  std::vector<float> xs = {0.0f, -0.0f};
  for (double e = -30; e <= 4; e += 1.0 / 64)
    for (double s : {1.0, -1.0}) xs.push_back(float(s * std::pow(10.0, e)));
  for (int i = -16 * 1024; i <= 16 * 1024; ++i) xs.push_back(float(i) / 1024.0f);
  return xs;
}

struct Worst {
  double ulps = 0;  // largest |f - ref| / (|ref| * u * (1 + sensitivity)): errors in units of the bound
  float at = 0;
  int checked = 0;
};

// Relative error in units of u * (1 + sensitivity(x)), over points whose result is at least 2^-100: below
// about 1e-36 exp's own result is subnormal and carries fewer bits (and such outputs vanish in a GEMM's error).
template <class F, class Ref, class Sens>
Worst worst_error(F f, Ref ref, Sens sensitivity) {
  Worst w;
  for (float x : sweep()) {
    double r = ref(double(x));
    if (std::fabs(r) < 0x1p-100 || std::fabs(r) > FLT_MAX) continue;
    double err = std::fabs(double(f(x)) - r) / std::fabs(r) / (kU * (1.0 + sensitivity(double(x))));
    ++w.checked;
    if (!(err <= w.ulps)) w.ulps = err, w.at = x;  // NaN counts as the worst
  }
  return w;
}

double none(double) { return 0.0; }

struct Fragment {  // the members of cutlass::Array<float, 4> that the functor uses
  using Element = float;
  static constexpr size_t kElements = 4;
  float v[4];
  float& operator[](int i) { return v[i]; }
  const float& operator[](int i) const { return v[i]; }
};

}  // namespace

// The kernels receive the file as rendered, which must be exactly what this test compiled; its code (comments
// aside) calls no approximate intrinsic and no inline PTX.
TEST(Fp32Activation, TemplateHasNoSlotsAndNoApproximateMath) {
  auto path = fact::templates_dir() / "cutlass" / "fp32_activation.hpp.in";
  std::string text = fact::read_text_file(path, "activation template");
  EXPECT_EQ(fact::realize::render_template_file("cutlass/fp32_activation.hpp.in", {}), text);
  std::string code;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.find('\n', pos), text.size());
    std::string line = text.substr(pos, end - pos);
    code += line.substr(0, line.find("//")) + "\n";
    pos = end + 1;
  }
  // One reviewed exception: the reciprocal estimate, refined by a Newton step to the IEEE division's own fast path;
  // div_by_normal and div_by_reciprocal correct their quotients with it (the division without its check for extreme
  // operands).
  size_t rcp_begin = code.find("float refined_reciprocal(float b) {"), rcp_end = code.find("\n}\n", rcp_begin);
  ASSERT_NE(rcp_begin, std::string::npos);
  ASSERT_NE(rcp_end, std::string::npos);
  std::string rcp = code.substr(rcp_begin, rcp_end - rcp_begin);
  EXPECT_NE(rcp.find("rcp.approx.ftz.f32"), std::string::npos);
  EXPECT_NE(rcp.find("return fmaf(r, fmaf(-b, r, 1.0f), r)"), std::string::npos);
  code.erase(rcp_begin, rcp_end - rcp_begin);
  const size_t corrected = code.find("float corrected_quotient(");
  ASSERT_NE(corrected, std::string::npos);
  EXPECT_NE(code.substr(corrected, code.find("\n}\n", corrected) - corrected).find("fmaf(r, fmaf(-b, q, a), q)"),
            std::string::npos);
  for (const char* div : {"float div_by_normal(float a, float b) { return corrected_quotient(a, b, refined_reciprocal(b)); }",
                          "float div_by_reciprocal(float a, float b, float r, float s) { return corrected_quotient(a, b, r) * s; }"})
    EXPECT_NE(code.find(div), std::string::npos) << div;
  for (const char* approx : {"__expf", "__exp10f", "__tanhf", "__fdividef", "__frcp", "__powf", "exp2f", "asm",
                             ".approx", "fast_exp", "fast_tanh"})
    EXPECT_EQ(code.find(approx), std::string::npos) << approx;
  EXPECT_NE(code.find("::expf(x)"), std::string::npos);
  EXPECT_NE(code.find("::erfcf(x)"), std::string::npos);
}

TEST(Fp32Activation, GeluTanhWithinThreeUlpOfItsConditioning) {
  Worst w = worst_error(fact_act::gelu_tanh, gelu_tanh_ref, gelu_tanh_sensitivity);
  EXPECT_GT(w.checked, 25000);
  EXPECT_LE(w.ulps, kMaxUnits) << "at x = " << w.at;
  // Away from the negative tail the argument's rounding hardly matters: a few ulp outright.
  for (float x : {1e-30f, 1e-7f, 0.1f, 0.5f, 1.0f, 3.0f, 10.0f, 1e4f, 1e30f})
    EXPECT_LE(std::fabs(fact_act::gelu_tanh(x) - gelu_tanh_ref(x)) / gelu_tanh_ref(x), 3 * kU) << x;
}

// The bound above can fail: CUTLASS's formula 0.5 x (1 + tanh(u)) with an accurate tanhf, let alone
// tanh.approx, cancels in the negative tail and misses it there.
TEST(Fp32Activation, BoundRejectsTheCancellingTanhFormula) {
  auto cancelling = [](float x) {
    float u = 0.7978845608f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(u));
  };
  Worst w = worst_error(cancelling, gelu_tanh_ref, gelu_tanh_sensitivity);
  EXPECT_GT(w.ulps, kMaxUnits);
  EXPECT_LT(w.at, -2.0f);
}

TEST(Fp32Activation, GeluErfWithinThreeUlpOfItsConditioning) {
  Worst w = worst_error(fact_act::gelu_erf, gelu_erf_ref, gelu_erf_sensitivity);
  EXPECT_GT(w.checked, 25000);
  EXPECT_LE(w.ulps, kMaxUnits) << "at x = " << w.at;
}

TEST(Fp32Activation, ADivisorsScaleBringsItIntoTheReciprocalsRangeExactly) {
  const float denormal = 1e-40f, huge = 1e38f, max = std::numeric_limits<float>::max();
  EXPECT_EQ(fact_act::divisor_scale(denormal), std::ldexp(1.0f, 64));
  EXPECT_EQ(fact_act::divisor_scale(-huge), std::ldexp(1.0f, -64));
  EXPECT_EQ(fact_act::divisor_scale(max), std::ldexp(1.0f, -64));
  EXPECT_EQ(fact_act::divisor_scale(std::ldexp(1.0f, 126)), std::ldexp(1.0f, -64));
  EXPECT_EQ(fact_act::divisor_scale(std::nextafter(std::ldexp(1.0f, 126), 0.0f)), 1.0f);
  EXPECT_EQ(fact_act::divisor_scale(std::numeric_limits<float>::min()), 1.0f);
  for (float b : {0.0f, -0.0f, 1.0f, -3.5f, std::numeric_limits<float>::infinity(), std::nanf("")})
    EXPECT_EQ(fact_act::divisor_scale(b), 1.0f) << b;
  for (float b : {denormal, -denormal, huge, max, 3.0f}) {
    const float s = fact_act::divisor_scale(b), scaled = b * s;
    EXPECT_TRUE(std::isnormal(scaled) && std::fabs(scaled) < std::ldexp(1.0f, 126)) << b;
    EXPECT_EQ(scaled / s, b) << "the scaling is exact: " << b;
    for (float a : {1.0f, -7e-30f, 2.5e30f}) {
      const float q = fact_act::div_by_reciprocal(a, scaled, fact_act::row_reciprocal(scaled), s);
      // A denormal quotient is rounded twice (to b * s, then times s): within its last place.
      if (std::isnormal(a / b) || std::isinf(a / b)) EXPECT_EQ(q, a / b) << a << " / " << b;
      else EXPECT_LE(std::fabs(q - a / b), std::numeric_limits<float>::denorm_min()) << a << " / " << b;
    }
  }
}

// The device paths (rcp.approx and FMAs, which the host build above replaces by a division) against CUDA's IEEE
// division on special and random operands: built here with the production nvcc command, run where a GPU is.
TEST(Fp32ActivationNvcc, DivisionsKeepTheIeeeQuotientOnTheGpu) {
  std::string text = fact::realize::render_template_file("cutlass/fp32_activation.hpp.in", {}) +
                     fact::read_text_file(std::string(FACT_TEST_DATA) + "/fp32_division_on_gpu.cu", "GPU check");
  expect_runs_on_the_gpu(fact::Arch::sm90, text, "fp32_division_on_gpu");
}

TEST(Fp32Activation, SiluWithinThreeUlp) {
  Worst w = worst_error(fact_act::silu, silu_ref, none);  // its argument -x is exact
  EXPECT_GT(w.checked, 25000);
  EXPECT_LE(w.ulps, kMaxUnits) << "at x = " << w.at;
}

// mish through one exp and a division (n / (n + 2)) against tanh(log1p(exp(x))) in double.
TEST(Fp32Activation, MishWithinThreeUlp) {
  auto ref = [](double x) { return x * std::tanh(std::log1p(std::exp(x))); };
  Worst w = worst_error(fact_act::mish, ref, none);  // x is exact; the function's own conditioning is mild
  EXPECT_GT(w.checked, 25000);
  EXPECT_LE(w.ulps, kMaxUnits) << "at x = " << w.at;
  EXPECT_EQ(fact_act::mish(0.0f), 0.0f);
  EXPECT_EQ(fact_act::mish(1e30f), 1e30f);
  EXPECT_EQ(fact_act::mish(-1e30f), 0.0f);
  EXPECT_TRUE(std::isnan(fact_act::mish(NAN)));
}

TEST(Fp32Activation, LimitsAndSpecialValues) {
  for (auto f : {fact_act::gelu_tanh, fact_act::gelu_erf, fact_act::silu}) {
    EXPECT_EQ(f(0.0f), 0.0f);
    EXPECT_EQ(f(INFINITY), INFINITY);
    EXPECT_EQ(f(1e30f), 1e30f);        // x itself, no overflow in x^3 or exp
    EXPECT_EQ(f(-1e30f), 0.0f);        // underflows to (-)0, not NaN
    EXPECT_TRUE(std::isnan(f(NAN)));
  }
}

// CUTLASS calls the functor on a float or on a fragment (cutlass::Array<float, N>): element by element.
TEST(Fp32Activation, FragmentsApplyElementByElement) {
  Fragment in{{-3.0f, -0.5f, 0.25f, 8.0f}};
  Fragment out = fact_act::GeluTanh<Fragment>{}(in);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], fact_act::gelu_tanh(in[i]));
  EXPECT_EQ(fact_act::Silu<float>{}(2.0f), fact_act::silu(2.0f));
  EXPECT_EQ(fact_act::GeluErf<float>{}(-1.0f), fact_act::gelu_erf(-1.0f));
  EXPECT_TRUE(fact_act::GeluTanh<float>::kIsHeavy);
}
