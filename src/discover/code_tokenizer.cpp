#include "discover/code_tokenizer.h"

#include <algorithm>
#include <iterator>
#include <cctype>

namespace fact::discover {

namespace {

// Words nearly every example contains; dropping them keeps documents short and scores on what differs.
constexpr std::string_view kCommonWords[] = {
    "include", "define", "ifdef", "ifndef", "endif", "pragma", "once", "int", "void", "const",
    "constexpr", "return", "auto", "struct", "class", "template", "typename", "using", "namespace",
    "static", "inline", "if", "else", "for", "while", "do", "switch", "case", "break", "continue",
    "std", "cutlass", "true", "false", "nullptr", "sizeof", "bool", "char", "unsigned", "long",
    "short", "typedef", "public", "private", "protected", "operator", "this", "the", "an", "of",
    "to", "and", "or", "in", "is", "it", "be", "by", "on", "as", "at", "with", "that", "are",
    "from", "not", "can", "will", "we", "you", "our", "its", "has", "have", "which", "these",
    "those", "used", "use", "uint", "size", "value", "type", "params", "args", "arguments", "cout", "endl"};

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; }
bool is_upper(char c) { return std::isupper(static_cast<unsigned char>(c)) != 0; }
bool is_lower(char c) { return std::islower(static_cast<unsigned char>(c)) != 0; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Boundaries inside one word: aB, ABc (before B), letter|digit, digit|letter.
std::vector<std::string_view> split_word(std::string_view w) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  for (size_t i = 1; i < w.size(); ++i) {
    char p = w[i - 1], c = w[i];
    bool cut = (is_lower(p) && is_upper(c)) || (is_digit(p) != is_digit(c)) ||
               (is_upper(p) && is_upper(c) && i + 1 < w.size() && is_lower(w[i + 1]));
    if (cut) {
      parts.push_back(w.substr(start, i - start));
      start = i;
    }
  }
  parts.push_back(w.substr(start));
  return parts;
}

void emit(std::vector<std::string>& out, std::string term) {
  if (term.size() < 2 || is_common_code_word(term)) return;
  out.push_back(std::move(term));
}

}  // namespace

bool is_common_code_word(std::string_view term) {
  return std::find(std::begin(kCommonWords), std::end(kCommonWords), term) != std::end(kCommonWords);
}

std::vector<std::string> tokenize_code(std::string_view text) {
  std::vector<std::string> out;
  std::string previous_word;  // the word just before a single hyphen, else empty
  size_t i = 0;
  while (i < text.size()) {
    if (!is_word_char(text[i])) {
      ++i;
      continue;
    }
    size_t start = i;
    while (i < text.size() && is_word_char(text[i])) ++i;
    std::string_view word = text.substr(start, i - start);
    std::string whole = lower(word);
    auto parts = split_word(word);
    for (auto part : parts) emit(out, lower(part));
    if (parts.size() > 1) emit(out, whole);
    if (!previous_word.empty()) emit(out, previous_word + whole);
    bool hyphen_next = i + 1 < text.size() && text[i] == '-' && is_word_char(text[i + 1]);
    previous_word = hyphen_next ? whole : std::string();
  }
  return out;
}

}  // namespace fact::discover
