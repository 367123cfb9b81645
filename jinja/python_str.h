// Python's str semantics on UTF-8 text, for the Jinja engine's filters and string methods:
// lengths and indices count code points, whitespace is str.isspace()'s, case mapping is Unicode's
// full mapping (ICU), repr() quotes and escapes as CPython does. Inputs are valid UTF-8 (the
// engine checks templates and JSON checks its strings). Pure functions: safe from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pdserve::jinja::py {

std::u32string Decode(std::string_view utf8);
std::string Encode(std::u32string_view text);
void AppendUtf8(char32_t c, std::string& out);
// Code points in `utf8`.
size_t Length(std::string_view utf8);

// str.isspace() of one character (the Unicode whitespace Python's str.strip() removes).
bool IsSpace(char32_t c);
// str.isprintable() of one character: what repr() leaves unescaped.
bool IsPrintable(char32_t c);

// str.strip/lstrip/rstrip: `chars` absent strips whitespace.
std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right);
// str.split / str.rsplit: `sep` absent splits on runs of whitespace; maxsplit < 0: no limit. An
// empty separator is InvalidArgument ("empty separator"), as in Python.
Result<std::vector<std::string>> Split(std::string_view s, const std::optional<std::string>& sep,
                                       int64_t maxsplit, bool from_right);
// str.splitlines: splits at \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, U+2028, U+2029.
std::vector<std::string> SplitLines(std::string_view s, bool keepends);
// str.replace: count < 0 replaces all; an empty `old` inserts `replacement` between characters.
std::string Replace(std::string_view s, std::string_view old, std::string_view replacement,
                    int64_t count);
// str.find / str.rfind over s[start:end] (Python slice bounds): a code point index or -1.
int64_t Find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool from_right);
// str.count(sub) over the whole string.
int64_t Count(std::string_view s, std::string_view sub);

std::string Upper(std::string_view s);
std::string Lower(std::string_view s);
// str.title(): titlecase after an uncased character, lowercase after a cased one.
std::string Title(std::string_view s);
// str.capitalize(): the first character titlecased, the rest lowercased.
std::string Capitalize(std::string_view s);
std::string SwapCase(std::string_view s);

// str.isdigit / isalpha / isalnum / isspace / islower / isupper / isnumeric / isdecimal.
bool IsDigitString(std::string_view s);
bool IsAlphaString(std::string_view s);
bool IsAlnumString(std::string_view s);
bool IsSpaceString(std::string_view s);
bool IsLowerString(std::string_view s);
bool IsUpperString(std::string_view s);

// str.center / ljust / rjust with `fill` (one character) to `width` code points.
std::string Pad(std::string_view s, int64_t width, char32_t fill, int where /* -1 l, 0 c, 1 r */);

// repr(s): 'text' (or "text" when s holds ' and no "), with \\, \n, \r, \t, the quote and
// unprintable characters escaped (\xhh, \uhhhh, \Uhhhhhhhh).
std::string Repr(std::string_view s);

// repr(float): the shortest text that reads back the same, in Python's layout ("1.0", "0.1",
// "1e+16", "1.5e-07", "inf", "nan").
std::string FloatRepr(double d);

}  // namespace pdserve::jinja::py
