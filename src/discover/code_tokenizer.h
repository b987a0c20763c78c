#pragma once
// Turns source code and prose into search terms, so that `GemmUniversalStreamK`, `gemm_universal_streamk`
// and "stream-k" meet on the same tokens.
#include <string>
#include <string_view>
#include <vector>

namespace fact::discover {

// Lowercased terms in text order. A word (a run of letters and digits) is split at camelCase and
// letter/digit boundaries ("FP8Gemm" -> fp, 8, gemm); a word that splits also yields itself whole
// ("fp8gemm"), and two words joined by one hyphen yield their concatenation ("stream-k" -> streamk).
// Terms of one character and very common C++/English words are dropped.
std::vector<std::string> tokenize_code(std::string_view text);

// True for the terms tokenize_code drops as too common to tell examples apart ("include", "the", ...).
bool is_common_code_word(std::string_view term);

}  // namespace fact::discover
