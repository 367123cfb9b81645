// Tokenizer: text <-> token ids for BPE models, byte-level (Llama-3, Qwen, DeepSeek-V3, gpt-oss)
// and SentencePiece-style (Llama-2, Mistral, TinyLlama, Gemma: "▁" for space, byte_fallback),
// loaded from a Hugging Face tokenizer.json and, in a model directory, tokenizer_config.json and
// generation_config.json. Encode follows Hugging Face tokenizers step by step: added tokens are
// split out of the raw text, the rest is normalized (tokenizer/normalizer.h), pre-tokenized
// (regex Split, ByteLevel, Metaspace) and BPE-encoded, and the post_processor adds BOS and the
// like when asked; Decode runs the file's decoder (tokenizer/decoder.h). Built once by Load and
// immutable after: safe for concurrent const use from any thread (the internal word cache is
// locked).
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
#include "tokenizer/chat_template.h"

namespace pdserve::tokenizer {

class BpeModel;
class Decoder;
class Normalizer;
class PreTokenizer;
class AddedTokenMatcher;

class Tokenizer {
 public:
  // `file_or_model_dir`: a tokenizer.json file, or a directory holding tokenizer.json and
  // optionally tokenizer_config.json (bos/eos tokens, chat_template), chat_template.jinja (which
  // wins over the config's chat_template; one that does not parse fails the load, naming its
  // line) and generation_config.json (eos_token_id). Errors name the file and what is wrong
  // with it; parts of tokenizer.json that pdserve does not implement (another model type, a
  // Metaspace pre-tokenizer, ...) are refused as Unimplemented rather than encoded wrongly.
  static Result<std::shared_ptr<const Tokenizer>> Load(const std::string& file_or_model_dir);
  // A chat_template.jinja file's text and the path its errors name.
  struct ChatTemplateFile {
    std::string text;  // empty: none
    std::string path;
  };
  // Builds from the text of tokenizer.json and, when not empty, of tokenizer_config.json,
  // generation_config.json and a chat_template.jinja. `origin` names the source in error
  // messages.
  static Result<std::shared_ptr<const Tokenizer>> FromJsonText(
      std::string_view tokenizer_json, std::string_view config_json, std::string_view origin,
      std::string_view generation_config_json = {}, const ChatTemplateFile& template_file = {});
  ~Tokenizer();

  // Token ids of `text`. Text that spells an added token ("<|eot_id|>") becomes that token;
  // with `parse_special` false, special tokens are not recognised in the text (it is encoded as
  // ordinary characters), which keeps end users from injecting control tokens.
  // `add_special`: let the post_processor add its tokens (BOS for Llama-3, nothing for Qwen2).
  // Invalid UTF-8 is InvalidArgument giving the byte offset; a regex engine resource limit on
  // pathological input is ResourceExhausted.
  Result<std::vector<int32_t>> Encode(std::string_view text, bool add_special,
                                      bool parse_special = true) const;

  // The text of `ids`, as Hugging Face's decode gives it: the tokens' spellings through the
  // file's decoder (bytes that do not form valid UTF-8 become U+FFFD; a SentencePiece file's
  // "▁" becomes a space, less the one its normalizer put at the start). Ids out of range are
  // skipped. `skip_special`: leave out special tokens (BOS, <|eot_id|>, ...). Streaming the
  // same ids through IncrementalDetokenizer (tokenizer/detokenizer.h) gives the same text.
  std::string Decode(std::span<const int32_t> ids, bool skip_special) const;

  // The raw bytes a token stands for in the middle of a text (an added token's content; " the"
  // for "Ġthe" or "▁the"; one byte for a byte token, so possibly part of a UTF-8 character).
  // Empty for an unknown id.
  std::string TokenBytes(int32_t id) const;
  // Id of a token as spelled in tokenizer.json ("Ġthe", "<|eot_id|>").
  std::optional<int32_t> TokenId(std::string_view token) const;
  // The token as Hugging Face's id_to_token gives it, which is what Decode decodes: its spelling
  // in tokenizer.json, or for an added token with normalized: true, that text as the normalizer
  // writes it ("▁foo" for "foo" with a Prepend "▁" normalizer). Empty for an unknown id.
  std::string_view TokenText(int32_t id) const;

  // One past the largest id of the vocab and the added tokens (the embedding rows needed).
  int32_t vocab_size() const { return vocab_size_; }
  std::optional<int32_t> bos_id() const { return bos_id_; }
  // Ids that end a generation: tokenizer_config's eos_token, generation_config's eos_token_id
  // and the chat template's end-of-turn token; without a model directory, whichever of
  // <|end_of_text|>, <|eot_id|>, <|im_end|>, <|endoftext|> exist.
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }
  bool IsSpecial(int32_t id) const;
  const ChatTemplate& chat_template() const { return chat_template_; }
  // tokenizer.json's decoder, for streaming (DecodeStream) token by token.
  const Decoder& decoder() const { return *decoder_; }

 private:
  struct TokenInfo {
    std::string content;  // an added token's text (normalized when the token is)
    bool special = false;
  };
  Tokenizer();
  Status Build(const nlohmann::json& root, const nlohmann::json& config,
               const nlohmann::json& generation, const ChatTemplateFile& template_file);
  // `at_origin`: `text` starts at the beginning of the input (a Metaspace pre-tokenizer's
  // prepend_scheme "first" prepends only there).
  Status EncodeText(std::string_view text, bool parse_special, bool at_origin,
                    std::vector<int32_t>& ids) const;
  Status EncodeNormalized(std::string_view text, bool at_origin, std::vector<int32_t>& ids) const;

  std::unique_ptr<const BpeModel> bpe_;
  std::unique_ptr<const Normalizer> normalizer_;
  std::unique_ptr<const PreTokenizer> pre_tokenizer_;
  std::unique_ptr<const Decoder> decoder_;
  // Added tokens matched before and after normalizing; [0] without special tokens, [1] all.
  std::unique_ptr<const AddedTokenMatcher> raw_added_[2];
  std::unique_ptr<const AddedTokenMatcher> normalized_added_[2];
  std::unordered_map<int32_t, TokenInfo> added_;  // by id
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::vector<int32_t> prefix_ids_, suffix_ids_;  // what add_special puts around the text
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_;
  std::vector<int32_t> eos_ids_;
  ChatTemplate chat_template_;
};

}  // namespace pdserve::tokenizer
