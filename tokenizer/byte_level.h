// Byte-level helpers for GPT-2-style BPE tokenizers (Llama-3, Qwen2): the reversible map between
// the 256 byte values and the printable characters that tokenizer.json uses to spell them. The
// UTF-8 checks the tokenizer and the incremental detokenizer share are in common/utf8.h. Pure
// functions over immutable tables: safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/utf8.h"

namespace pdserve::tokenizer {

// The character (as UTF-8) that GPT-2's bytes_to_unicode() assigns to `byte`: printable Latin-1
// bytes map to themselves, the others to U+0100.. in order ("Ġ" is the space byte 0x20).
std::string_view ByteToSymbol(uint8_t byte);

// Inverse of ByteToSymbol over a whole token spelling: "Ġthe" -> " the". nullopt when the text
// holds a character that is not one of the 256 symbols (such a token is not byte-level).
std::optional<std::string> SymbolsToBytes(std::string_view symbols);

// Spells raw bytes in symbols: " the" -> "Ġthe".
std::string BytesToSymbols(std::string_view bytes);

}  // namespace pdserve::tokenizer
