// tokenizer.json's "decoder": turns token spellings back into text, as Hugging Face tokenizers'
// decode does, and does it one token at a time for streaming (DecodeStream) with exactly the
// text a decode of the whole sequence gives.
//
// Supported: ByteLevel (Llama-3, Qwen, DeepSeek-V3, gpt-oss), and the SentencePiece-style steps
// Replace (a String pattern), ByteFallback, Fuse, Strip and Metaspace in a Sequence (Llama-2,
// Mistral, TinyLlama, Gemma: Replace "▁" -> " ", ByteFallback, Fuse, Strip one leading space),
// and null (spellings joined by spaces, as Hugging Face does without a decoder). Steps after Fuse
// act on the whole text, so only those whose effect on the whole equals their effect token by
// token, or that only touch its start, are accepted: Strip with stop 0, and Replace of a single
// character. Other types and orders are refused as Unimplemented.
//
// Immutable after FromJson: safe for concurrent const use from any thread. A DecodeStream is one
// sequence's state, used from one thread at a time.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/status.h"

namespace pdserve::tokenizer {

class Decoder {
 public:
  // `config` is tokenizer.json's "decoder". `byte_level_default`: what null means; true for
  // files whose pre-tokenizer is ByteLevel (decoding their spellings joined by spaces would give
  // "Ġthe Ġcat", never what anyone wants).
  static Result<Decoder> FromJson(const nlohmann::json& config, bool byte_level_default);

  bool byte_level() const { return kind_ == Kind::kByteLevel; }

  // The bytes one token stands for in the middle of a sequence: " the" for "Ġthe" or "▁the",
  // one byte for "<0xE4>" (byte_fallback), possibly part of a UTF-8 character.
  std::string TokenBytes(std::string_view token) const;

 private:
  friend class DecodeStream;
  enum class Kind { kJoinWithSpace, kByteLevel, kPieces };
  struct Step {
    enum Type { kReplace, kStrip, kMetaspace } type = kReplace;
    std::string from, to;  // Replace: the literal and its replacement; Metaspace: "▁" and " "
    size_t start = 0, stop = 0;  // Strip: at most this many `from` characters at each end
    bool drop_in_first = false;  // Metaspace: the first token loses every `from` (not never)
  };
  static Status AddSteps(const nlohmann::json& config, Decoder& out, bool& fused, bool& fallback);

  // Applies per-token `steps` to `token`; `first`: it is the first token those steps see.
  static std::string ApplySteps(const std::vector<Step>& steps, std::string token, bool first);

  Kind kind_ = Kind::kJoinWithSpace;
  std::vector<Step> before_fallback_;  // per token, before ByteFallback (all of them without it)
  std::vector<Step> after_fallback_;   // per token, on ByteFallback's output
  std::vector<Step> after_fuse_;       // Strip (stop 0) and one-character Replace, on the text
  bool byte_fallback_ = false;
};

// One sequence being decoded token by token. The concatenation of every Add and the final
// Finish equals Decoder-applied decoding of all the tokens at once, and every piece is whole
// UTF-8 characters. Tokens that cannot be final yet are held back: the end of a UTF-8 character
// (ByteLevel), or a run of <0xNN> byte tokens (ByteFallback), which becomes text only when a
// token that is not a byte ends it, because Hugging Face turns a run that is not valid UTF-8
// into one U+FFFD per byte, the valid characters before the bad byte included.
class DecodeStream {
 public:
  explicit DecodeStream(const Decoder& decoder) : decoder_(&decoder) {}

  // Appends to `out` the text that token `token` (its spelling) completes.
  void Add(std::string_view token, std::string& out);
  // Ends the sequence: appends what was held back (a cut-off character as U+FFFD).
  void Finish(std::string& out);
  // Bytes held back (ByteLevel's incomplete character, or ByteFallback's run).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  void EndByteRun(std::string& out);
  // Passes ByteFallback's output token through the steps after it and on to the text.
  void EmitPiece(std::string piece, std::string& out);
  // The text after Fuse: the steps that act on the whole of it.
  void EmitText(std::string_view text, std::string& out);

  const Decoder* decoder_;
  std::string pending_;           // bytes held back
  size_t tokens_ = 0;             // tokens added
  size_t pieces_ = 0;             // ByteFallback outputs emitted
  std::vector<size_t> stripped_;  // per after-fuse step: leading characters Strip may still take
};

}  // namespace pdserve::tokenizer
