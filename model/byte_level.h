// Byte-level helpers for GPT-2-style BPE tokenizers (Llama-3, Qwen2): the reversible map between
// the 256 byte values and the printable characters that tokenizer.json uses to spell them, and
// the UTF-8 checks the tokenizer and the incremental detokenizer share. Pure functions over
// immutable tables: safe to call from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pdserve::model {

// The character (as UTF-8) that GPT-2's bytes_to_unicode() assigns to `byte`: printable Latin-1
// bytes map to themselves, the others to U+0100.. in order ("Ġ" is the space byte 0x20).
std::string_view ByteToSymbol(uint8_t byte);

// Inverse of ByteToSymbol over a whole token spelling: "Ġthe" -> " the". nullopt when the text
// holds a character that is not one of the 256 symbols (such a token is not byte-level).
std::optional<std::string> SymbolsToBytes(std::string_view symbols);

// Spells raw bytes in symbols: " the" -> "Ġthe".
std::string BytesToSymbols(std::string_view bytes);

// Length of the well-formed UTF-8 sequence at text[pos] (1..4), or 0 when the bytes there are
// not well formed (overlong forms, surrogates and values past U+10FFFF are not), or when the
// sequence is cut short by the end of `text`.
size_t Utf8SequenceLength(std::string_view text, size_t pos);

// Offset of the first byte that does not start a well-formed UTF-8 sequence, or nullopt when
// the whole text is valid UTF-8.
std::optional<size_t> FindInvalidUtf8(std::string_view text);

// How many bytes at the end of `bytes` are a proper prefix of a well-formed UTF-8 sequence that
// more bytes could still complete (0..3). A streaming decoder holds these back.
size_t IncompleteUtf8Suffix(std::string_view bytes);

// Appends `bytes` to `out` as valid UTF-8, replacing each maximal ill-formed subpart with
// U+FFFD (the Unicode "substitution of maximal subparts" rule, as Rust's from_utf8_lossy and
// the WHATWG decoder do), so a stream cut anywhere outside a sequence converts the same way.
void AppendUtf8Lossy(std::string_view bytes, std::string& out);

}  // namespace pdserve::model
