#include "agent/llm_agent.h"

#include <fmt/format.h>

#include <chrono>
#include <set>

#include "agent/reply_schema.h"
#include "core/error.h"
#include "realize/kernel_abi_header.h"
#include "realize/template_renderer.h"

namespace fact::agent {
using nlohmann::json;

namespace {

std::string utc_now() {
  auto t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

class LlmAgent : public Agent {
 public:
  LlmAgent(ChatBackend& llm, LlmAgentOptions o) : llm_(llm), o_(std::move(o)) {}

  AgentReport run(Tools& tools) override {
    AgentReport r;
    r.agent = "llm:" + llm_.model();
    const discover::Plan& plan = tools.plan();
    reuse_registry_patterns(tools, r);
    auto candidates = rowwise_candidates(plan);
    if (candidates.empty()) {
      r.lines.push_back("no uncovered row-wise fragment: nothing for the LLM to generate, no request sent");
      return r;
    }
    json system = {{"role", "system"},
                   {"content", realize::render_template_file("agent/system.md", {{"abi", rowwise_abi_text()}})}};
    std::vector<FragmentTask> tasks;
    try {
      tasks = propose(tools, candidates, system, r);
    } catch (const Error& e) {
      r.ok = false;
      r.lines.push_back(std::string("stopped: ") + e.what());
      return r;
    }
    json outcomes = json::array();
    for (const auto& t : tasks) {
      RefineOutcome o = refine_kernel(llm_, tools, t, system, o_.refine);
      outcomes.push_back({{"pattern", t.name}, {"verified", o.verified}, {"rounds", o.rounds}, {"stages_done", o.stages_done},
                          {"stop_reason", o.stop_reason}, {"history", o.history}});
      if (!o.verified) {
        r.ok = false;
        r.lines.push_back(fmt::format("{}: no verified kernel after {} rounds ({}); PyTorch's ops stay, registry unchanged",
                                      t.name, o.rounds, o.stop_reason));
        continue;
      }
      json record = {{"format", "fact-registry-entry"}, {"version", 1}, {"name", t.name}, {"family", "rowwise"},
                     {"arch", tools.arch().name}, {"dtype", t.fragment.dtype}, {"numerics", plan.numerics},
                     {"created", utc_now()}, {"source_model", plan.graph.source_path},
                     {"fragment", t.fragment_json}, {"workload", workload_summary(tools, t.fragment)},
                     {"kernel", {{"abi", "FactRowwiseArgs"}, {"abi_version", realize::kernel_abi_version()},
                                 {"id", t.name}, {"entry", "fact_" + t.name + "_run"}, {"source_file", "kernel.cu"},
                                 {"config", o.best.config}}},
                     {"verification", o.best_verdict.details},
                     {"agent", {{"model", llm_.model()}, {"endpoint", o_.endpoint}, {"rounds", o.rounds},
                                {"stages_done", o.stages_done}, {"transcript", o_.transcript_name}}}};
      record["verification"]["passed"] = true;
      json rule = fragment_rule(plan.graph, t.fragment, t.name, tools.arch().name,
                                fmt::format("Generated row-wise kernel for {} (verified by FACT's harness)", t.name));
      auto dir = tools.register_pattern(rule, record, o.best.source);
      r.registered.push_back(t.name);
      r.lines.push_back(fmt::format("{}: verified in round {} ({} of 4 stages, {}), registered at {}", t.name,
                                    o.best.config.value("round", 0), o.stages_done, o.stop_reason, dir.string()));
    }
    r.details["patterns"] = outcomes;
    return r;
  }

 private:
  ChatBackend& llm_;
  LlmAgentOptions o_;

  // A registry pattern the plan matched is reused without the LLM, after its stored kernel is compiled and
  // verified again on this graph's shapes (a registry written elsewhere is not trusted blindly).
  void reuse_registry_patterns(Tools& tools, AgentReport& r) {
    for (const auto& e : tools.plan().entries) {
      if (e.match.kernel.value("kind", "") != "generated") continue;
      r.reused.push_back(e.match.rule);
      std::string where = fmt::format("{}: matched at {} from the registry (no LLM call)", e.match.rule, e.match.anchor);
      try {
        auto entry = tools.registry_entry(e.match.rule);
        auto f = make_rowwise_fragment(tools.plan().graph, e.match.nodes, {});
        KernelCandidate k{entry.record["kernel"].value("id", e.match.rule), entry.kernel_source,
                          entry.record["kernel"].value("config", json::object())};
        CompileResult c = tools.compile(k);
        if (!c.ok) throw Error("its stored kernel no longer compiles: " + c.diagnostics.substr(0, 400));
        Verdict v = tools.verify(k, c, fragment_to_json(tools.plan().graph, f));
        if (v.status == "no_gpu") r.lines.push_back(where + "; verified when registered, not re-verified here: " + v.message);
        else if (v.passed()) r.lines.push_back(where + "; its stored kernel re-verified on this graph: " + v.message);
        else throw Error("its stored kernel failed re-verification (" + v.status + "): " + v.message);
      } catch (const Error& err) {
        r.ok = false;
        r.lines.push_back(where + "; " + err.what());
      }
    }
  }

  std::vector<FragmentTask> propose(Tools& tools, const std::vector<RowwiseFragment>& candidates, const json& system,
                                    AgentReport& r) {
    const discover::Plan& plan = tools.plan();
    const json tool = load_tool("propose_patterns");
    std::set<std::string> covered;
    for (const auto& e : plan.entries)  // a generated row-wise kernel is one the agent may replace
      if (e.match.rule != discover::kGeneratedRowwiseRule) covered.insert(e.match.nodes.begin(), e.match.nodes.end());
    std::set<std::string> rule_names;
    std::string rules_text;
    for (auto& n : tools.list_rules()) {
      rule_names.insert(n.substr(0, n.find(' ')));
      rules_text += (rules_text.empty() ? "" : ", ") + n.substr(0, n.find(' '));
    }
    json cands = json::array();
    for (const auto& f : candidates)
      cands.push_back({{"nodes", f.nodes}, {"output", f.output}, {"inputs", f.inputs}, {"rows", f.rows}, {"cols", f.cols},
                       {"dtype", f.dtype}, {"workload", workload_summary(tools, f)}});
    json messages = json::array({system, {{"role", "user"}, {"content", realize::render_template_file("agent/plan.md", {
        {"model", plan.graph.source_path}, {"arch", to_string(plan.arch)}, {"numerics", to_string(plan.numerics)},
        {"plan", discover::format_plan(plan)}, {"graph", tools.inspect_graph().dump()},
        {"candidates", cands.dump(1)}, {"rules", rules_text}})}}});
    std::string last;
    for (int attempt = 1; attempt <= o_.max_plan_replies; ++attempt) {
      json assistant = llm_.complete(messages, tool);  // throws Error after the client's own retries
      messages.push_back(assistant);
      try {
        json args = reply_arguments(assistant, "propose_patterns", tool.at("parameters"));
        std::vector<FragmentTask> tasks;
        std::set<std::string> names, nodes_taken;
        for (const auto& p : args["patterns"]) {
          std::string name = p["name"];
          if (rule_names.count(name) || !names.insert(name).second)
            throw ReplyError(fmt::format("pattern name '{}' is already taken; choose another", name));
          std::vector<std::string> nodes = p["nodes"].get<std::vector<std::string>>();
          for (const auto& n : nodes)
            if (!nodes_taken.insert(n).second) throw ReplyError(fmt::format("node '{}' is in two proposed patterns", n));
          RowwiseFragment f;
          try {
            f = make_rowwise_fragment(plan.graph, nodes, covered);
            if (f.inner > 1)
              throw Error(fmt::format("it reduces dims {} elements apart; the FactRowwiseArgs ABI takes contiguous rows "
                                      "(FACT generates kernels for strided rows itself)", f.inner));
          } catch (const Error& e) {
            throw ReplyError(fmt::format("pattern '{}': {}", name, e.what()));
          }
          tasks.push_back({name, f, fragment_to_json(plan.graph, f)});
          r.lines.push_back(fmt::format("LLM proposes {}: {} ({} nodes, output {}): {}", name, fmt::join(f.nodes, ","),
                                        f.nodes.size(), f.output, p["reason"].get<std::string>()));
        }
        if (tasks.empty()) r.lines.push_back("the LLM proposed no pattern; PyTorch's ops stay");
        return tasks;
      } catch (const ReplyError& e) {
        last = e.what();
        r.lines.push_back(fmt::format("plan reply {} unusable: {}", attempt, last));
        json fb = assistant.contains("tool_calls") && !assistant["tool_calls"].empty()
                      ? json{{"role", "tool"}, {"tool_call_id", assistant["tool_calls"][0].value("id", "call_0")}}
                      : json{{"role", "user"}};
        fb["content"] = "Your reply could not be used: " + last + ". Call propose_patterns again.";
        messages.push_back(fb);
      }
    }
    throw Error(fmt::format("no usable plan from the LLM after {} replies; the last problem: {}", o_.max_plan_replies, last));
  }
};

}  // namespace

std::unique_ptr<Agent> make_llm_agent(ChatBackend& llm, LlmAgentOptions options) {
  return std::make_unique<LlmAgent>(llm, std::move(options));
}

}  // namespace fact::agent
