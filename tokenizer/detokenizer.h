// IncrementalDetokenizer: turns a stream of generated token ids into text as they arrive, for
// SSE streaming. Text that cannot be final yet is held back: a token may end inside a UTF-8
// character (byte-level BPE splits emoji and CJK into byte tokens), and a SentencePiece file's
// run of <0xNN> byte tokens becomes text only when it ends (tokenizer/decoder.h says why), so no
// chunk ever carries half a character. The concatenation of every Add() and the final Flush()
// equals Tokenizer::Decode of the whole sequence, a SentencePiece file's leading-space Strip
// included (it applies at the start of the sequence only). One instance per sequence, used from
// one thread at a time (not internally locked); the shared Tokenizer is only read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/decoder.h"
#include "tokenizer/tokenizer.h"

namespace pdserve::tokenizer {

class IncrementalDetokenizer {
 public:
  // `skip_special`: as in Tokenizer::Decode.
  explicit IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                  bool skip_special = true);

  // Feeds one id; returns the text completed by it (often empty while a character is pending).
  std::string Add(int32_t id);
  // Ends the stream: bytes still held (a character cut off) come out as U+FFFD.
  std::string Flush();
  // Bytes held back waiting for the rest of a character or of a run of byte tokens.
  size_t pending_bytes() const { return stream_.pending_bytes(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  DecodeStream stream_;  // reads tokenizer_'s decoder, which tokenizer_ keeps alive
};

}  // namespace pdserve::tokenizer
