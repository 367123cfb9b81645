// Writes a small, complete Hugging Face tokenizer for pdserve's built-in test models: byte-level
// BPE in the Llama-3 layout, loadable by pdserve's Tokenizer and by Hugging Face tokenizers /
// transformers.js. Deterministic: the same call writes the same bytes. Pure function of its
// arguments (writes only the two files named below): safe from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace pdserve::tokenizer {

// Ids in the tokenizer WriteByteLevelTokenizer writes:
//   0..255                 the 256 byte tokens, id = byte value (spelt with GPT-2's byte symbols)
//   256..kByteLevelSpecialBase-1   merged tokens built from common English words
//   kByteLevelSpecialBase + 0..4   <|begin_of_text|>, <|end_of_text|>, <|start_header_id|>,
//                                  <|end_header_id|>, <|eot_id|>  (all special)
//   then, up to `vocab_size`, <|reserved_special_token_N|> (special) as padding.
inline constexpr int32_t kByteLevelMergeCount = 512;
inline constexpr int32_t kByteLevelSpecialBase = 256 + kByteLevelMergeCount;  // 768
inline constexpr int32_t kByteLevelBosId = kByteLevelSpecialBase;             // <|begin_of_text|>
inline constexpr int32_t kByteLevelEndOfTextId = kByteLevelSpecialBase + 1;   // <|end_of_text|>
inline constexpr int32_t kByteLevelEotId = kByteLevelSpecialBase + 4;         // <|eot_id|>
inline constexpr int32_t kByteLevelMinVocabSize = kByteLevelSpecialBase + 5;  // 773

// Writes `model_dir`/tokenizer.json (Llama-3 pre-tokenizer regex, ByteLevel, BPE with
// ignore_merges, a TemplateProcessing post_processor that prepends <|begin_of_text|>) and
// `model_dir`/tokenizer_config.json (Llama-3 chat_template, bos_token <|begin_of_text|>,
// eos_token <|eot_id|>). The directory is created if missing; existing files are replaced.
// `vocab_size`: 0 for the natural size (kByteLevelMinVocabSize), or a larger size to match a
// model's embedding rows (padded with reserved special tokens); smaller is InvalidArgument.
// Returns the vocab size written.
Result<int32_t> WriteByteLevelTokenizer(const std::string& model_dir, int32_t vocab_size = 0);

}  // namespace pdserve::tokenizer
