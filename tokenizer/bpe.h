// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}): vocab, merges
// (the "a b" string form or the [a, b] array form), ignore_merges, unk_token with fuse_unk, and
// byte_fallback. Words start as one symbol per byte (byte-level files, whose pre-tokenizer maps
// bytes to GPT-2's symbols) or per character (SentencePiece-style files: Llama-2, Mistral,
// Gemma); a character the vocab lacks becomes its UTF-8 bytes' <0xNN> tokens with
// byte_fallback, else unk_token (consecutive ones fused into one with fuse_unk), else nothing, as
// in Hugging Face tokenizers. Merging uses a priority queue over a linked list of symbols, so
// long words cost O(n log n), not O(n^2). Immutable after FromJson except an internal cache of
// encoded words, which is sharded and locked: safe for concurrent const use from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace pdserve::tokenizer {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object; `byte_level`: the pre-tokenizer has a ByteLevel
  // step, so words arrive as raw bytes. Fails with InvalidArgument naming the problem (not BPE, a
  // merge whose parts or result are not in the vocab, a duplicate id, ...), or Unimplemented
  // for options pdserve does not implement (dropout, a continuing_subword_prefix, ...).
  static Result<std::unique_ptr<const BpeModel>> FromJson(const nlohmann::json& model,
                                                          bool byte_level);
  ~BpeModel();

  // Appends the ids of one pre-token: raw bytes for a byte-level model (not in byte-level
  // symbols), else UTF-8 text as the pre-tokenizer left it ("▁Hello").
  void EncodeWord(std::string_view word, std::vector<int32_t>& ids) const;

  // One past the largest vocab id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The token's spelling in tokenizer.json ("Ġthe", "▁the", "<0x0A>"); empty for an id the
  // vocab lacks.
  std::string_view Token(int32_t id) const;
  // Id of a spelling as written in tokenizer.json.
  std::optional<int32_t> TokenId(std::string_view token) const;
  size_t merge_count() const { return merges_.size(); }
  bool byte_level() const { return byte_level_; }

 private:
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using StringMap = std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>>;
  struct MergeRule {
    int32_t rank;
    int32_t result;
  };
  class WordCache;

  BpeModel();
  // The word's symbols before any merge, in `symbols`.
  void InitialSymbols(std::string_view word, std::vector<int32_t>& symbols) const;
  // Merges `symbols` (all valid ids) and appends the result to `ids`.
  void ApplyMerges(const std::vector<int32_t>& symbols, std::vector<int32_t>& ids) const;

  std::vector<std::string> id_to_token_;            // spelling; empty where no id
  StringMap token_to_id_;                           // spelling -> id
  StringMap bytes_to_id_;                           // raw bytes -> id (byte-level tokens only)
  std::unordered_map<uint64_t, MergeRule> merges_;  // (left id << 32 | right id) -> merge
  int32_t byte_ids_[256];      // byte-level: id of each byte's symbol, -1 if absent
  int32_t fallback_ids_[256];  // byte_fallback: id of "<0xNN>" for each byte, -1 if absent
  int32_t unk_id_ = -1;
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace pdserve::tokenizer
