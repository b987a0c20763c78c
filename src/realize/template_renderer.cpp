#include "realize/template_renderer.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>

#include "core/error.h"
#include "core/files.h"
#include "core/paths.h"

namespace fact::realize {
namespace {

bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

int line_of(const std::string& text, size_t pos) {
  return 1 + int(std::count(text.begin(), text.begin() + long(pos), '\n'));
}

// Calls on_text for literal runs and on_slot for each {{name}}; throws on malformed slots.
template <class OnText, class OnSlot>
void scan(const std::string& text, const std::string& what, OnText on_text, OnSlot on_slot) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t open = text.find("{{", pos);
    if (open == std::string::npos) {
      on_text(text.substr(pos));
      return;
    }
    on_text(text.substr(pos, open - pos));
    size_t close = text.find("}}", open + 2);
    if (close == std::string::npos)
      throw Error(fmt::format("{}:{}: '{{{{' has no closing '}}}}'", what, line_of(text, open)));
    std::string name = text.substr(open + 2, close - open - 2);
    if (name.empty() || !std::all_of(name.begin(), name.end(), is_name_char))
      throw Error(fmt::format("{}:{}: slot '{{{{{}}}}}' is not a name (letters, digits, _)", what,
                              line_of(text, open), name));
    on_slot(name, line_of(text, open));
    pos = close + 2;
  }
}

}  // namespace

std::vector<std::string> template_slots(const std::string& text, const std::string& what) {
  std::vector<std::string> names;
  std::set<std::string> seen;
  scan(text, what, [](const std::string&) {}, [&](const std::string& n, int) {
    if (seen.insert(n).second) names.push_back(n);
  });
  return names;
}

std::string render_template(const std::string& text, const TemplateValues& values, const std::string& what) {
  std::string out;
  out.reserve(text.size() * 2);
  std::set<std::string> used;
  scan(text, what, [&](const std::string& t) { out += t; }, [&](const std::string& n, int line) {
    auto it = values.find(n);
    if (it == values.end())
      throw Error(fmt::format("{}:{}: slot '{{{{{}}}}}' has no value; the code generator must provide it", what, line, n));
    out += it->second;
    used.insert(n);
  });
  for (const auto& [name, value] : values)
    if (!used.count(name))
      throw Error(fmt::format("{}: value '{}' has no '{{{{{}}}}}' slot; remove it or add the slot to the template",
                              what, name, name));
  return out;
}

std::string render_template_file(const std::filesystem::path& relative_path, const TemplateValues& values) {
  auto path = templates_dir() / relative_path;
  return render_template(read_text_file(path, "kernel template"), values, path.string());
}

}  // namespace fact::realize
