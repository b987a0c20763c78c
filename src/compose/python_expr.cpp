#include "compose/python_expr.h"

#include <fmt/format.h>

#include "core/error.h"
#include "ir/graph.h"

namespace fact::compose {

std::string python_float(double v) {
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEni") == std::string::npos) s += ".0";
  return s;
}

std::string python_expr(const nlohmann::json& arg, const VariableOf& var, const std::string& device_expr,
                        const std::string& where) {
  if (arg.is_null()) return "None";
  if (arg.is_boolean()) return arg.get<bool>() ? "True" : "False";
  if (arg.is_number_integer()) return arg.dump();
  if (arg.is_number_float()) return python_float(arg.get<double>());
  if (arg.is_string()) return arg.dump();  // a JSON string is a valid Python string literal
  if (arg.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < arg.size(); ++i)
      out += (i ? ", " : "") + python_expr(arg[i], var, device_expr, where);
    return out + "]";
  }
  if (ir::is_ref(arg)) {
    std::string v = var(ir::ref_name(arg));
    return arg.contains("index") ? fmt::format("{}[{}]", v, arg["index"].get<int64_t>()) : v;
  }
  if (arg.contains("float")) return fmt::format("float({})", arg["float"].dump());
  if (arg.contains("dtype")) return "torch." + arg["dtype"].get<std::string>();
  if (arg.contains("device")) return device_expr;
  if (arg.contains("enum")) return arg["enum"].get<std::string>();
  throw Error(fmt::format("{}: argument {} cannot be written as Python (re-trace with a FACT that encodes it, or "
                          "keep this module out of compose)", where, arg.dump()));
}

}  // namespace fact::compose
