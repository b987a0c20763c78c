#pragma once
// The suite's chart (suite.png), drawn by python/fact/bench/suite_chart.py with matplotlib.
#include <filesystem>
#include <string>

namespace fact::bench {

// Empty on success, else one line saying why no chart was drawn (the report says it instead of failing).
std::string draw_suite_chart(const std::filesystem::path& suite_json, const std::filesystem::path& png);

}  // namespace fact::bench
