#include "agent/kernel_refiner.h"

#include <fmt/format.h>

#include "agent/reply_schema.h"
#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"
#include "realize/kernel_abi_header.h"
#include "realize/template_renderer.h"

namespace fact::agent {
using nlohmann::json;

namespace {

std::string clip(const std::string& s, size_t n) { return s.size() > n ? s.substr(0, n) + "\n[... trimmed]" : s; }

std::string render(const std::string& file, const realize::TemplateValues& values) {
  return realize::render_template_file(std::filesystem::path("agent") / file, values);
}

// The reply to the assistant's message: a tool result when it called the tool, else a user message.
json feedback_message(const json& assistant, const std::string& text) {
  if (assistant.contains("tool_calls") && assistant["tool_calls"].is_array() && !assistant["tool_calls"].empty())
    return {{"role", "tool"}, {"tool_call_id", assistant["tool_calls"][0].value("id", "call_0")}, {"content", text}};
  return {{"role", "user"}, {"content", text}};
}

// Only the fields the next prompt needs: errors and counts, not the harness's whole record.
std::string verdict_digest(const Verdict& v) {
  json d = json::object();
  for (const char* k : {"max_abs_err", "max_rel_err", "rel_fro_err", "tolerance", "unwritten", "out_of_bounds",
                        "inputs_changed", "worst_element", "shape", "launch_status"})
    if (v.details.contains(k)) d[k] = v.details[k];
  return d.dump();
}

double kernel_us(const Verdict& v) {
  return v.details.contains("profile") ? v.details["profile"].value("kernel_us", 0.0) : 0.0;
}

}  // namespace

std::string rowwise_abi_text() { return realize::render_family_abi(realize::family_abi("rowwise")); }

json workload_summary(Tools& tools, const RowwiseFragment& f) {
  auto c = tools.estimate_cost(f);
  const auto& a = tools.arch();
  double intensity = c.bytes_fused > 0 ? c.flops / c.bytes_fused : 0;
  return {{"rows", f.rows}, {"cols", f.cols}, {"dtype", f.dtype}, {"inputs", f.inputs.size()},
          {"bytes_min", c.bytes_fused}, {"flops", c.flops}, {"arithmetic_intensity_flop_per_byte", intensity},
          {"bound", c.bound}, {"roofline_us", c.seconds_fused * 1e6}, {"pytorch_estimate_us", c.seconds_now * 1e6},
          {"pytorch_kernels", c.kernels_now}, {"arch", a.name}, {"dram_bytes_per_s", a.dram_bytes_per_s},
          {"sm_count", a.sm_count}, {"smem_per_sm_bytes", a.smem_per_sm_bytes}};
}

RefineOutcome refine_kernel(ChatBackend& llm, Tools& tools, const FragmentTask& task, const json& system_message,
                            const RefineOptions& options) {
  const json stages = read_json_file(data_dir() / "agent" / "stages.json", "agent stages file").at("stages");
  const json tool = load_tool("submit_kernel");
  const json workload = workload_summary(tools, task.fragment);
  std::string examples;
  for (const auto& hit : tools.retrieve_examples("row reduction softmax layernorm elementwise warp shuffle cute", 3))
    examples += fmt::format("- {}: {}\n", hit.ref, hit.title);
  if (examples.empty()) examples = "(none on this machine)\n";
  json messages = json::array({system_message,
                               {{"role", "user"},
                                {"content", render("kernel.md", {{"pattern", task.name},
                                                                 {"kernel_id", task.name},
                                                                 {"fragment", task.fragment_json.dump(1)},
                                                                 {"workload", workload.dump()},
                                                                 {"examples", examples},
                                                                 {"stage_count", std::to_string(stages.size())},
                                                                 {"stage", stages[0]["name"]},
                                                                 {"stage_goal", stages[0]["goal"]}})}}});
  RefineOutcome out;
  size_t stage = 0;
  int bad_in_a_row = 0;
  auto best_text = [&] {
    return out.verified ? fmt::format("{:.1f} us (round {})", kernel_us(out.best_verdict), out.best.config.value("round", 0))
                        : std::string("none yet");
  };
  while (out.rounds < options.max_rounds) {
    ++out.rounds;
    json entry = {{"round", out.rounds}, {"stage", stages[stage]["name"]}};
    json assistant;
    try {
      assistant = llm.complete(messages, tool);
    } catch (const Error& e) {
      out.stop_reason = fmt::format("the LLM could not be reached: {}", e.what());
      entry["outcome"] = "no_reply";
      out.history.push_back(entry);
      break;
    }
    messages.push_back(assistant);
    json args;
    try {
      args = reply_arguments(assistant, "submit_kernel", tool.at("parameters"));
      std::string symbol = fmt::format("fact_{}_run", task.name);
      if (args["source"].get<std::string>().find(symbol) == std::string::npos)
        throw ReplyError(fmt::format("the source does not define {} (the exported entry point)", symbol));
    } catch (const ReplyError& e) {
      entry["outcome"] = "bad_reply";
      entry["message"] = e.what();
      out.history.push_back(entry);
      if (++bad_in_a_row >= options.max_bad_replies) {
        out.stop_reason = fmt::format("{} unusable replies in a row; the last: {}", bad_in_a_row, e.what());
        break;
      }
      messages.push_back(feedback_message(assistant, fmt::format(
          "Round {}: your reply could not be used: {}. Call submit_kernel with {{\"source\": ..., \"notes\": ...}}.",
          out.rounds, e.what())));
      continue;
    }
    bad_in_a_row = 0;
    KernelCandidate k{task.name, args["source"].get<std::string>(), args.value("config", json::object())};
    k.config["round"] = out.rounds;
    k.config["stage"] = stages[stage]["name"];
    CompileResult c = tools.compile(k);
    entry["compile_seconds"] = c.seconds;
    if (!c.ok) {
      entry["outcome"] = c.timed_out ? "compile_timeout" : "compile_error";
      entry["message"] = clip(c.diagnostics, 600);
      out.history.push_back(entry);
      messages.push_back(feedback_message(assistant, render("feedback_compile.md",
          {{"round", std::to_string(out.rounds)}, {"timed_out", c.timed_out ? " (compile time limit reached)" : ""},
           {"diagnostics", clip(c.diagnostics, 2500)}})));
      continue;
    }
    Verdict v = tools.verify(k, c, task.fragment_json);
    entry["outcome"] = v.status;
    entry["message"] = v.message;
    out.history.push_back(entry);
    if (v.status == "no_gpu") {
      out.stop_reason = "the kernel compiled, but it cannot be verified on this machine: " + v.message;
      break;
    }
    if (!v.passed()) {
      std::string keep = out.verified ? fmt::format("The verified version of round {} is kept meanwhile. ",
                                                    out.best.config.value("round", 0))
                                      : "";
      messages.push_back(feedback_message(assistant, render("feedback_verify.md",
          {{"round", std::to_string(out.rounds)}, {"status", v.status}, {"message", v.message},
           {"details", verdict_digest(v)}, {"keep", keep}})));
      continue;
    }
    if (!out.verified || kernel_us(v) < kernel_us(out.best_verdict)) {
      out.best = k;
      out.best_verdict = v;
    }
    out.verified = true;
    out.stages_done = static_cast<int>(stage) + 1;
    if (++stage >= stages.size()) {
      out.stop_reason = "every optimization stage produced a verified kernel";
      break;
    }
    json profile = v.details.value("profile", json::object());
    if (v.details.contains("ncu")) profile["ncu"] = v.details["ncu"];
    messages.push_back(feedback_message(assistant, render("feedback_profile.md",
        {{"round", std::to_string(out.rounds)}, {"errors", verdict_digest(v)}, {"profile", profile.dump()},
         {"best", best_text()}, {"roofline", fmt::format("{:.1f} us ({}-bound)", workload["roofline_us"].get<double>(),
                                                          workload["bound"].get<std::string>())},
         {"stage_number", std::to_string(stage + 1)}, {"stage_count", std::to_string(stages.size())},
         {"stage", stages[stage]["name"]}, {"stage_goal", stages[stage]["goal"]}})));
  }
  if (out.stop_reason.empty())
    out.stop_reason = fmt::format("the round limit ({}) was reached", options.max_rounds);
  return out;
}

}  // namespace fact::agent
