// IncrementalDetokenizer: turns a stream of generated token ids into text as they arrive, for
// SSE streaming. A token may end inside a UTF-8 character (byte-level BPE splits emoji and CJK
// into byte tokens); those bytes are held back until the character completes, so no chunk ever
// carries half a character. The concatenation of every Add() and the final Flush() equals
// Tokenizer::Decode of the whole sequence. One instance per sequence, used from one thread at a
// time (not internally locked); the shared Tokenizer is only read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace pdserve::model {

class IncrementalDetokenizer {
 public:
  // `skip_special`: as in Tokenizer::Decode.
  explicit IncrementalDetokenizer(std::shared_ptr<const Tokenizer> tokenizer,
                                  bool skip_special = true);

  // Feeds one id; returns the text completed by it (often empty while a character is pending).
  std::string Add(int32_t id);
  // Ends the stream: bytes still held (a character cut off) come out as U+FFFD.
  std::string Flush();
  // Bytes held back waiting for the rest of a character (0..3).
  size_t pending_bytes() const { return pending_.size(); }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes not yet emitted: an incomplete UTF-8 sequence
};

}  // namespace pdserve::model
