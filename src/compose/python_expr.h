#pragma once
// IR argument encodings (docs/ir-format.md) as Python source, for the composed module's forward.
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace fact::compose {

// Maps a referenced node name to the Python variable that holds its value.
using VariableOf = std::function<std::string(const std::string& node)>;

// One encoded argument as a Python expression: refs via `var`, literals, {"float": "-inf"},
// {"dtype": ...}, {"enum": ...}, lists. Devices become `device_expr`, because the IR was traced on
// another device (often meta) than the module will run on. Throws Error naming `where` for
// {"repr": ...} values, which cannot be replayed.
std::string python_expr(const nlohmann::json& arg, const VariableOf& var, const std::string& device_expr,
                        const std::string& where);

// A Python float literal that stays a float (1.0, not 1) and round-trips exactly.
std::string python_float(double v);

}  // namespace fact::compose
