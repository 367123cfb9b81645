// The byte-level BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE", ...}):
// vocab, merges (the "a b" string form or the [a, b] array form), ignore_merges. Encodes one
// pre-token (raw bytes) at a time with a priority queue over a linked list of symbols, so long
// words cost O(n log n), not O(n^2). Immutable after FromJson except an internal cache of
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

namespace pdserve::model {

class BpeModel {
 public:
  // `model` is tokenizer.json's "model" object. Fails with InvalidArgument naming the problem
  // (not BPE, a merge whose parts or result are not in the vocab, a duplicate id, ...).
  static Result<std::unique_ptr<const BpeModel>> FromJson(const nlohmann::json& model);
  ~BpeModel();

  // Appends the ids of one pre-token given as raw bytes (not in byte-level symbols).
  void EncodeWord(std::string_view bytes, std::vector<int32_t>& ids) const;

  // One past the largest vocab id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }
  // The token's spelling in tokenizer.json ("Ġthe"); empty for an id the vocab lacks.
  std::string_view Token(int32_t id) const;
  // The raw bytes a token stands for (" the").
  std::string_view TokenBytes(int32_t id) const;
  // Id of a spelling as written in tokenizer.json.
  std::optional<int32_t> TokenId(std::string_view token) const;
  size_t merge_count() const { return merges_.size(); }

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
  void ApplyMerges(std::string_view bytes, std::vector<int32_t>& ids) const;

  std::vector<std::string> id_to_token_;            // spelling; empty where no id
  std::vector<std::string> id_to_bytes_;            // raw bytes
  StringMap token_to_id_;                           // spelling -> id
  StringMap bytes_to_id_;                           // raw bytes -> id (byte-level tokens only)
  std::unordered_map<uint64_t, MergeRule> merges_;  // (left id << 32 | right id) -> merge
  int32_t byte_ids_[256];                           // id of each single byte, -1 if absent
  int32_t unk_id_ = -1;
  bool ignore_merges_ = false;
  std::unique_ptr<WordCache> cache_;
};

}  // namespace pdserve::model
