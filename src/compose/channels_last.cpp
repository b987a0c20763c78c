#include "compose/channels_last.h"

#include <algorithm>
#include <map>

#include "core/error.h"
#include "discover/channels_last_chain.h"
#include "realize/kernel_family.h"

namespace fact::compose {
namespace {

using nlohmann::json;

// The verdict's family's channels-last support for its tuned problem and config (none where they do not parse).
realize::ChannelsLast support_of(const PatternVerdict& v) {
  const realize::KernelFamily* family = realize::kernel_family_named(v.family);
  if (!family || !v.row.is_object() || !v.row.contains("problem") || !v.row.contains("config")) return {};
  try {
    return family->channels_last(v.row["problem"], v.row["config"]);
  } catch (const Error&) {
    return {};
  }
}

// Whether every pattern variable of `reader` bound to graph node `value` is the variable of an operand it reads
// channels-last.
bool reads_in_place(const discover::Match& reader, const realize::ChannelsLast& support, const std::string& value) {
  const json operands = reader.kernel.value("operands", json::object());
  for (const auto& [var, node] : reader.inputs) {
    if (node != value) continue;
    bool in_place = std::any_of(support.reads.begin(), support.reads.end(), [&](const std::string& operand) {
      if (!operands.contains(operand) || !operands[operand].is_string()) return false;
      std::string bound = operands[operand];
      return bound == var || bound == "$" + var || "$" + bound == var;
    });
    if (!in_place) return false;
  }
  return true;
}

// How a reader takes a value that may be channels-last.
enum class Reader {
  in_place,  // an accepted FACT op reading it channels-last
  keeps,     // a PyTorch op running on it as it is (its result may be channels-last in turn)
  needs_order,  // the graph's results, any other PyTorch op, a FACT op reading PyTorch's order
};

class Layouts {
 public:
  Layouts(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts) : plan_(plan), g_(plan.graph) {
    for (const auto& v : verdicts) {
      if (!v.accepted) continue;
      for (const auto& n : plan.entries[v.entry].match.nodes) covered_by_[n] = &v;
      support_[&v] = support_of(v);
    }
  }

  const std::map<const PatternVerdict*, realize::ChannelsLast>& support() const { return support_; }
  const discover::Match& match(const PatternVerdict* v) const { return plan_.entries[v->entry].match; }

  Reader reader(const std::string& user, const std::string& value, const PatternVerdict* producer) const {
    if (user == "<output>") return Reader::needs_order;
    if (auto it = covered_by_.find(user); it != covered_by_.end())
      return it->second != producer && reads_in_place(match(it->second), support_.at(it->second), value)
                 ? Reader::in_place : Reader::needs_order;
    // Any other op than discover's order-keeping ones (a view fails on a channels-last tensor, a row reduction would
    // copy it) is given PyTorch's order.
    return discover::keeps_channels_last(g_.at(user)) ? Reader::keeps : Reader::needs_order;
  }

  int64_t bytes(const std::string& value) const {
    const ir::Node* n = g_.find(value);
    return n && !n->outputs.empty() ? n->outputs[0].bytes() : 0;
  }

  // Whether a reader of `value` needs PyTorch's order (`producer`: the accepted op writing it, if any).
  bool reordered(const std::string& value, const PatternVerdict* producer = nullptr) const {
    const auto& users = g_.users(value);
    return std::any_of(users.begin(), users.end(),
                       [&](const std::string& user) { return reader(user, value, producer) == Reader::needs_order; });
  }

  // Bytes read channels-last in place (gained: each such read was a copy into a kernel's workspace) minus bytes made
  // contiguous again, over the values `anchor`'s channels-last result reaches through PyTorch's ops.
  int64_t gain(const std::string& anchor, const PatternVerdict* producer) const {
    int64_t gain = 0;
    std::vector<std::string> todo = {anchor};
    std::set<std::string> seen = {anchor};
    while (!todo.empty()) {
      std::string value = todo.back();
      todo.pop_back();
      if (value != anchor && reordered(value)) {  // made contiguous where it is defined: nothing past it gains
        gain -= bytes(value);
        continue;
      }
      for (const auto& user : g_.users(value)) {
        Reader r = reader(user, value, value == anchor ? producer : nullptr);
        if (r == Reader::in_place) gain += bytes(value);
        else if (r == Reader::keeps && seen.insert(user).second) todo.push_back(user);
      }
    }
    return gain;
  }

 private:
  const discover::Plan& plan_;
  const ir::Graph& g_;
  std::map<std::string, const PatternVerdict*> covered_by_;  // covered node -> its accepted verdict
  std::map<const PatternVerdict*, realize::ChannelsLast> support_;
};

}  // namespace

ChannelsLastPlan channels_last_plan(const discover::Plan& plan, const std::vector<PatternVerdict>& verdicts) {
  const ir::Graph& g = plan.graph;
  Layouts layouts(plan, verdicts);
  ChannelsLastPlan out;
  for (const auto& [v, s] : layouts.support()) {
    const discover::Match& m = layouts.match(v);
    if (!s.writes || !m.extra_outputs.empty() || g.users(m.anchor).empty()) continue;
    // The op's own value cannot be made contiguous for one reader without losing it for the others.
    if (!layouts.reordered(m.anchor, v) && layouts.gain(m.anchor, v) > 0) out.writes.insert(m.anchor);
  }
  // The PyTorch ops that may then compute channels-last values, in graph order; those with a reader needing PyTorch's
  // order are made contiguous where they are defined.
  std::set<std::string> fed;
  auto feed = [&](const std::string& value) {
    for (const auto& user : g.users(value))
      if (layouts.reader(user, value, nullptr) == Reader::keeps) fed.insert(user);
  };
  for (const auto& anchor : out.writes) feed(anchor);
  for (const auto& n : g.nodes) {
    if (!fed.count(n.name)) continue;
    if (layouts.reordered(n.name)) out.contiguous.insert(n.name);
    else feed(n.name);
  }
  return out;
}

}  // namespace fact::compose
