// UTF-8 well-formedness as Unicode defines it (no overlong forms, surrogates or values past
// U+10FFFF): checks for text that goes into JSON (the tokenizer, the detokenizer's stream, the
// ledger's tags) and a lossy conversion. Pure functions: safe to call from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace pdserve {

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

}  // namespace pdserve
