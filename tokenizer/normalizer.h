// tokenizer.json's "normalizer": the text rewrite that runs on the input between added tokens,
// before the pre-tokenizer. Supports what Llama-3/Qwen (NFC) and SentencePiece-style files
// (Llama-2, Mistral, Gemma: Prepend "▁", Replace " " -> "▁") use, with Hugging Face tokenizers'
// semantics. Built once from JSON and then immutable: safe for concurrent const use from any
// thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace pdserve::tokenizer {

class Normalizer {
 public:
  // Accepts null and these types, alone or in a {"type":"Sequence","normalizers":[...]}:
  //   NFC, NFD, NFKC, NFKD   Unicode normalization (ICU)
  //   Prepend {"prepend"}    puts the text in front of a non-empty input
  //   Replace {"pattern": {"String": s}, "content"}   replaces every occurrence of s
  // Anything else (Lowercase, a Regex pattern, ...) is Unimplemented, naming it.
  static Result<Normalizer> FromJson(const nlohmann::json& config);

  // True when Apply returns its input unchanged (null, or an empty Sequence).
  bool is_identity() const { return steps_.empty(); }
  // `text` must be valid UTF-8; so is the result.
  Result<std::string> Apply(std::string_view text) const;

 private:
  struct Step {
    const void* form = nullptr;  // icu::Normalizer2 singleton, or null for Prepend/Replace
    std::string pattern;         // Replace: the literal searched for
    std::string content;         // Prepend: the prefix; Replace: the replacement
    bool prepend = false;
  };
  static Status AddSteps(const nlohmann::json& config, Normalizer& out);

  std::vector<Step> steps_;  // applied in order
};

}  // namespace pdserve::tokenizer
