// The text-splitting stages of a Hugging Face tokenizer.json that run before the BPE model:
// added-token extraction (AddedTokenMatcher) and the pre-tokenizer (PreTokenizer: Split with a
// regex or literal pattern, ByteLevel, Metaspace, or a Sequence of those). The normalizer that
// runs between the two is in tokenizer/normalizer.h. Each is built once from JSON and then
// immutable: safe for concurrent const use from any thread (regex match scratch space is per
// thread).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"
#include "tokenizer/normalizer.h"

namespace pdserve::tokenizer {

// A compiled PCRE2 pattern (UTF, Unicode properties, JIT when available).
class Regex {
 public:
  // `literal` compiles the text as a plain string (tokenizer.json's {"String": ...}).
  static Result<std::shared_ptr<const Regex>> Compile(std::string_view pattern, bool literal);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Byte ranges [begin, end) of the successive non-empty, non-overlapping matches in `text`
  // (valid UTF-8). Fails only if the regex engine hits a resource limit.
  Status FindAll(std::string_view text, std::vector<std::pair<size_t, size_t>>& matches) const;

 private:
  explicit Regex(void* code) : code_(code) {}
  void* code_;  // pcre2_code_8*
};

// The GPT-2 pattern that ByteLevel uses when use_regex is true.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// tokenizer.json's "pre_tokenizer": turns one run of text into the pieces ("words") that the BPE
// model encodes separately.
class PreTokenizer {
 public:
  // Accepts null, Split (Regex or String pattern; behaviors Isolated, Removed,
  // MergedWithPrevious, MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space,
  // use_regex), Metaspace (replacement, prepend_scheme always/first/never or the older
  // add_prefix_space, split) and Sequence of those; anything else is Unimplemented, naming the
  // type.
  static Result<PreTokenizer> FromJson(const nlohmann::json& config);

  // Appends the pieces of `text` (valid UTF-8) to `pieces`. Empty pieces are dropped.
  // `at_origin`: `text` starts at the beginning of the input, not after an added token; Metaspace
  // with prepend_scheme "first" prepends its replacement only there (as Hugging Face does, by
  // the piece's offset in the original input).
  Status Split(std::string_view text, std::vector<std::string>& pieces,
               bool at_origin = true) const;

  // Whether a ByteLevel step is present (the tokenizer then works on raw bytes).
  bool byte_level() const { return byte_level_; }

 private:
  enum class Behavior { kIsolated, kRemoved, kMergedWithPrevious, kMergedWithNext, kContiguous };
  enum class Prepend { kNever, kFirst, kAlways };
  struct Step {
    std::shared_ptr<const Regex> regex;  // null: no split (ByteLevel without regex, ...)
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;      // ByteLevel only
    std::string metaspace;              // Metaspace only: the character that replaces ' '
    Prepend prepend = Prepend::kNever;  // Metaspace only: when to put it in front
  };
  static Status AddSteps(const nlohmann::json& config, PreTokenizer& out);
  static Status AddMetaspace(const nlohmann::json& config, PreTokenizer& out);
  // `at_origin`: whether pieces[0] starts at the beginning of the input; updated for the result.
  static Status ApplyStep(const Step& step, std::vector<std::string>& pieces, bool& at_origin);

  std::vector<Step> steps_;
  bool byte_level_ = false;
};

// One entry of tokenizer.json's "added_tokens".
struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false;       // the match swallows whitespace on its left
  bool rstrip = false;       // ... and on its right
  bool single_word = false;  // matches only with no word character right before or after
  bool normalized = false;   // matched in normalized text rather than in the raw input
};

// Finds added tokens in text the way Hugging Face tokenizers does: leftmost-longest matches,
// single_word and lstrip/rstrip honoured. Immutable after construction.
class AddedTokenMatcher {
 public:
  struct Segment {
    size_t begin = 0, end = 0;  // byte range in the searched text
    int32_t token_id = -1;      // -1: plain text to pass on to the model
  };

  AddedTokenMatcher() = default;
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);
  // by_content_ points into tokens_: no copies.
  AddedTokenMatcher(const AddedTokenMatcher&) = delete;
  AddedTokenMatcher& operator=(const AddedTokenMatcher&) = delete;

  bool empty() const { return tokens_.empty(); }
  // Splits `text` into plain-text and added-token segments covering all of it (a stripped
  // space belongs to its token's segment). Plain segments may be empty and are then skipped.
  void Split(std::string_view text, std::vector<Segment>& segments) const;

 private:
  std::vector<AddedToken> tokens_;
  // Index into tokens_ by content; views point into tokens_.
  std::unordered_map<std::string_view, uint32_t> by_content_;
  // For each first byte, the distinct content lengths of tokens starting with it, longest
  // first: a position costs one hash lookup per length, however many tokens there are (a
  // padded vocab can hold tens of thousands of <|reserved_special_token_N|>).
  std::vector<std::vector<uint32_t>> lengths_by_first_byte_;
};

}  // namespace pdserve::tokenizer
