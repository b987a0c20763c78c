#pragma once
// Resumption: a problem is done when its folder holds a finished record (bench_result.json) made with the
// same settings from the same problem file. The record is written atomically and only after `fact
// optimize` completed, so a crashed, killed or half-written run leaves no valid record and is run again.
#include <filesystem>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/problem_result.h"

namespace fact::bench {

inline constexpr const char* kFinishedRecord = "bench_result.json";

// What must match for an earlier result to count: the problem file's SHA-256 and the optimize settings.
// (conv_numerics enters the key only when set, so earlier records keep matching.)
nlohmann::json run_key(const std::filesystem::path& problem_file, const std::string& arch, const std::string& numerics,
                       int top, const std::string& conv_numerics = "");

// The earlier result, or nullopt (with `why` saying so) when there is none, it is unreadable, or its key differs.
std::optional<ProblemResult> load_finished(const std::filesystem::path& problem_out, const nlohmann::json& key,
                                           std::string* why = nullptr);
void save_finished(const std::filesystem::path& problem_out, const nlohmann::json& key, const ProblemResult& result);

}  // namespace fact::bench
