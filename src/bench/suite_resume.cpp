#include "bench/suite_resume.h"

#include "core/files.h"
#include "core/sha256.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace fact::bench {

json run_key(const fs::path& problem_file, const std::string& arch, const std::string& numerics, int top,
             const std::string& conv_numerics) {
  json key = {{"problem_sha256", sha256_hex(read_text_file(problem_file, "problem file"))},
              {"arch", arch},
              {"numerics", numerics.empty() ? "default" : numerics},
              {"top", top}};
  if (!conv_numerics.empty()) key["conv_numerics"] = conv_numerics;
  return key;
}

std::optional<ProblemResult> load_finished(const fs::path& problem_out, const json& key, std::string* why) {
  auto say = [&](const std::string& text) {
    if (why) *why = text;
    return std::nullopt;
  };
  fs::path record = problem_out / kFinishedRecord;
  if (!fs::exists(record)) return say("no finished result");
  try {
    json j = read_json_file(record, "finished result");
    if (j.value("key", json()) != key) return say("finished with other settings or another version of the file");
    ProblemResult r = problem_result_from_json(j.at("result"));
    if (r.status == ProblemStatus::not_run) return say("recorded as not run");
    return r;
  } catch (const std::exception& e) {  // half-written or hand-edited: run it again
    return say(std::string("unreadable finished result (") + e.what() + ")");
  }
}

void save_finished(const fs::path& problem_out, const json& key, const ProblemResult& result) {
  write_file_atomic(problem_out / kFinishedRecord,
                    json{{"format", "fact-bench-problem"}, {"version", 1}, {"key", key}, {"result", to_json(result)}}.dump(1) +
                        "\n");
}

}  // namespace fact::bench
