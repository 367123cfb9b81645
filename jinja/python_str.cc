#include "jinja/python_str.h"

#include <unicode/locid.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/utf8.h"

namespace pdserve::jinja::py {
namespace {

bool IsAscii(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

bool IsLineBreak(char32_t c) {
  return c == '\n' || c == '\r' || c == 0x0b || c == 0x0c || c == 0x1c || c == 0x1d || c == 0x1e ||
         c == 0x85 || c == 0x2028 || c == 0x2029;
}

std::string IcuToUtf8(const icu::UnicodeString& u) {
  std::string out;
  u.toUTF8String(out);
  return out;
}

icu::UnicodeString IcuFromUtf8(std::string_view s) {
  return icu::UnicodeString::fromUTF8(icu::StringPiece(s.data(), static_cast<int32_t>(s.size())));
}

bool IsCased(char32_t c) { return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASED); }

bool IsCaseIgnorable(char32_t c) {
  return u_hasBinaryProperty(static_cast<UChar32>(c), UCHAR_CASE_IGNORABLE);
}

// Full lowercase of text[i], with Python's final-sigma rule for U+03A3.
void AppendLowerAt(const std::u32string& text, size_t i, std::string& out) {
  char32_t c = text[i];
  if (c < 0x80) {
    out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  if (c == 0x3A3) {
    size_t j = i;
    while (j > 0 && IsCaseIgnorable(text[j - 1])) --j;
    bool final_sigma = j > 0 && IsCased(text[j - 1]);
    if (final_sigma) {
      size_t k = i + 1;
      while (k < text.size() && IsCaseIgnorable(text[k])) ++k;
      final_sigma = k == text.size() || !IsCased(text[k]);
    }
    AppendUtf8(final_sigma ? 0x3C2 : 0x3C3, out);
    return;
  }
  icu::UnicodeString u(static_cast<UChar32>(c));
  out += IcuToUtf8(u.toLower(icu::Locale::getRoot()));
}

void AppendUpper(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    return;
  }
  icu::UnicodeString u(static_cast<UChar32>(c));
  out += IcuToUtf8(u.toUpper(icu::Locale::getRoot()));
}

void AppendTitle(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
    return;
  }
  icu::UnicodeString u(static_cast<UChar32>(c));
  u.toTitle(nullptr, icu::Locale::getRoot(),
            U_TITLECASE_WHOLE_STRING | U_TITLECASE_NO_LOWERCASE | U_TITLECASE_NO_BREAK_ADJUSTMENT);
  out += IcuToUtf8(u);
}

int32_t NumericType(char32_t c) {
  return u_getIntPropertyValue(static_cast<UChar32>(c), UCHAR_NUMERIC_TYPE);
}

// Python's slice bounds for s[start:end] over `length` items.
void AdjustBounds(std::optional<int64_t> start, std::optional<int64_t> end, int64_t length,
                  int64_t& begin, int64_t& stop) {
  begin = start.value_or(0);
  stop = end.value_or(length);
  if (begin < 0) begin = std::max<int64_t>(0, begin + length);
  if (stop < 0) stop = std::max<int64_t>(0, stop + length);
  stop = std::min(stop, length);
}

}  // namespace

std::u32string Decode(std::string_view utf8) {
  std::u32string out;
  out.reserve(utf8.size());
  size_t i = 0;
  while (i < utf8.size()) {
    size_t n = Utf8SequenceLength(utf8, i);
    if (n == 0) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    auto b = static_cast<unsigned char>(utf8[i]);
    char32_t c = n == 1 ? b : n == 2 ? (b & 0x1F) : n == 3 ? (b & 0x0F) : (b & 0x07);
    for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(utf8[i + k]) & 0x3F);
    out.push_back(c);
    i += n;
  }
  return out;
}

void AppendUtf8(char32_t c, std::string& out) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::string Encode(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUtf8(c, out);
  return out;
}

size_t Length(std::string_view utf8) {
  size_t n = 0;
  for (char c : utf8) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool IsSpace(char32_t c) {
  if (c < 0x80) return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsPrintable(char32_t c) {
  if (c < 0x80) return c >= 0x20 && c < 0x7F;
  switch (u_charType(static_cast<UChar32>(c))) {
    case U_CONTROL_CHAR:
    case U_FORMAT_CHAR:
    case U_SURROGATE:
    case U_PRIVATE_USE_CHAR:
    case U_UNASSIGNED:
    case U_LINE_SEPARATOR:
    case U_PARAGRAPH_SEPARATOR:
    case U_SPACE_SEPARATOR:
      return false;
    default:
      return true;
  }
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  std::u32string text = Decode(s);
  std::u32string set = chars ? Decode(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : IsSpace(c); };
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end && strip(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && strip(text[end - 1])) --end;
  }
  return Encode(std::u32string_view(text).substr(begin, end - begin));
}

Result<std::vector<std::string>> Split(std::string_view s, const std::optional<std::string>& sep,
                                       int64_t maxsplit, bool from_right) {
  std::vector<std::string> parts;
  int64_t left = maxsplit < 0 ? INT64_MAX : maxsplit;
  if (sep) {
    if (sep->empty()) return InvalidArgument("empty separator");
    if (!from_right) {
      size_t pos = 0;
      while (left-- > 0) {
        size_t at = s.find(*sep, pos);
        if (at == std::string_view::npos) break;
        parts.emplace_back(s.substr(pos, at - pos));
        pos = at + sep->size();
      }
      parts.emplace_back(s.substr(pos));
      return parts;
    }
    size_t end = s.size();
    while (left-- > 0) {
      if (end < sep->size()) break;
      size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      parts.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    parts.emplace_back(s.substr(0, end));
    std::reverse(parts.begin(), parts.end());
    return parts;
  }
  std::u32string text = Decode(s);
  std::u32string_view view(text);
  const int64_t n = static_cast<int64_t>(text.size());
  if (!from_right) {
    int64_t i = 0;
    while (left-- > 0) {
      while (i < n && IsSpace(text[i])) ++i;
      if (i == n) break;
      int64_t j = i;
      while (i < n && !IsSpace(text[i])) ++i;
      parts.push_back(Encode(view.substr(j, i - j)));
    }
    if (i < n) {
      while (i < n && IsSpace(text[i])) ++i;
      if (i != n) parts.push_back(Encode(view.substr(i)));
    }
    return parts;
  }
  int64_t i = n - 1;
  while (left-- > 0) {
    while (i >= 0 && IsSpace(text[i])) --i;
    if (i < 0) break;
    int64_t j = i;
    while (i >= 0 && !IsSpace(text[i])) --i;
    parts.push_back(Encode(view.substr(i + 1, j - i)));
  }
  if (i >= 0) {
    while (i >= 0 && IsSpace(text[i])) --i;
    if (i >= 0) parts.push_back(Encode(view.substr(0, i + 1)));
  }
  std::reverse(parts.begin(), parts.end());
  return parts;
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  std::u32string text = Decode(s);
  std::u32string_view view(text);
  std::vector<std::string> lines;
  size_t i = 0;
  while (i < text.size()) {
    size_t j = i;
    while (j < text.size() && !IsLineBreak(text[j])) ++j;
    size_t eol = j;
    if (j < text.size()) {
      j += (text[j] == '\r' && j + 1 < text.size() && text[j + 1] == '\n') ? 2 : 1;
      if (keepends) eol = j;
    }
    lines.push_back(Encode(view.substr(i, eol - i)));
    i = j;
  }
  return lines;
}

std::string Replace(std::string_view s, std::string_view old, std::string_view replacement,
                    int64_t count) {
  int64_t left = count < 0 ? INT64_MAX : count;
  std::string out;
  if (old.empty()) {
    std::u32string text = Decode(s);
    for (char32_t c : text) {
      if (left > 0) {
        out += replacement;
        --left;
      }
      AppendUtf8(c, out);
    }
    if (left > 0) out += replacement;
    return out;
  }
  size_t pos = 0;
  while (left-- > 0) {
    size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out += s.substr(pos, at - pos);
    out += replacement;
    pos = at + old.size();
  }
  out += s.substr(pos);
  return out;
}

int64_t Find(std::string_view s, std::string_view sub, std::optional<int64_t> start,
             std::optional<int64_t> end, bool from_right) {
  std::u32string text = Decode(s);
  std::u32string needle = Decode(sub);
  int64_t begin, stop;
  AdjustBounds(start, end, static_cast<int64_t>(text.size()), begin, stop);
  if (begin > static_cast<int64_t>(text.size())) return -1;
  if (stop - begin < static_cast<int64_t>(needle.size())) return -1;
  std::u32string_view window = std::u32string_view(text).substr(begin, stop - begin);
  size_t at = from_right ? window.rfind(needle) : window.find(needle);
  return at == std::u32string_view::npos ? -1 : begin + static_cast<int64_t>(at);
}

int64_t Count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(Length(s)) + 1;
  int64_t n = 0;
  for (size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size()))
    ++n;
  return n;
}

std::string Upper(std::string_view s) {
  if (IsAscii(s)) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
    }
    return out;
  }
  icu::UnicodeString u = IcuFromUtf8(s);
  return IcuToUtf8(u.toUpper(icu::Locale::getRoot()));
}

std::string Lower(std::string_view s) {
  if (IsAscii(s)) {
    std::string out(s);
    for (char& c : out) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
  }
  icu::UnicodeString u = IcuFromUtf8(s);
  return IcuToUtf8(u.toLower(icu::Locale::getRoot()));
}

std::string Title(std::string_view s) {
  std::u32string text = Decode(s);
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for (size_t i = 0; i < text.size(); ++i) {
    if (previous_cased) {
      AppendLowerAt(text, i, out);
    } else {
      AppendTitle(text[i], out);
    }
    previous_cased = IsCased(text[i]);
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  std::u32string text = Decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0) {
      AppendTitle(text[i], out);
    } else {
      AppendLowerAt(text, i, out);
    }
  }
  return out;
}

std::string SwapCase(std::string_view s) {
  std::u32string text = Decode(s);
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<UChar32>(text[i]);
    if (u_hasBinaryProperty(c, UCHAR_UPPERCASE)) {
      AppendLowerAt(text, i, out);
    } else if (u_hasBinaryProperty(c, UCHAR_LOWERCASE)) {
      AppendUpper(text[i], out);
    } else {
      AppendUtf8(text[i], out);
    }
  }
  return out;
}

bool IsDigitString(std::string_view s) {
  std::u32string text = Decode(s);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char32_t c) {
    int32_t t = NumericType(c);
    return t == U_NT_DECIMAL || t == U_NT_DIGIT;
  });
}

bool IsAlphaString(std::string_view s) {
  std::u32string text = Decode(s);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char32_t c) {
    return u_isalpha(static_cast<UChar32>(c));
  });
}

bool IsAlnumString(std::string_view s) {
  std::u32string text = Decode(s);
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char32_t c) {
    return u_isalpha(static_cast<UChar32>(c)) || NumericType(c) != U_NT_NONE;
  });
}

bool IsSpaceString(std::string_view s) {
  std::u32string text = Decode(s);
  return !text.empty() && std::all_of(text.begin(), text.end(), IsSpace);
}

bool IsLowerString(std::string_view s) {
  bool cased = false;
  for (char32_t c : Decode(s)) {
    auto u = static_cast<UChar32>(c);
    if (u_hasBinaryProperty(u, UCHAR_UPPERCASE) || u_charType(u) == U_TITLECASE_LETTER) {
      return false;
    }
    if (u_hasBinaryProperty(u, UCHAR_LOWERCASE)) cased = true;
  }
  return cased;
}

bool IsUpperString(std::string_view s) {
  bool cased = false;
  for (char32_t c : Decode(s)) {
    auto u = static_cast<UChar32>(c);
    if (u_hasBinaryProperty(u, UCHAR_LOWERCASE) || u_charType(u) == U_TITLECASE_LETTER) {
      return false;
    }
    if (u_hasBinaryProperty(u, UCHAR_UPPERCASE)) cased = true;
  }
  return cased;
}

std::string Pad(std::string_view s, int64_t width, char32_t fill, int where) {
  int64_t length = static_cast<int64_t>(Length(s));
  int64_t margin = width - length;
  if (margin <= 0) return std::string(s);
  int64_t left = where < 0 ? 0 : where > 0 ? margin : margin / 2 + (margin & width & 1);
  std::string pad;
  AppendUtf8(fill, pad);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += pad;
  out += s;
  for (int64_t i = left; i < margin; ++i) out += pad;
  return out;
}

std::string Repr(std::string_view s) {
  char quote = '\'';
  if (s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos) quote = '"';
  static constexpr char kHex[] = "0123456789abcdef";
  auto hex = [&](std::string& out, char32_t c, int digits) {
    for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4) out += kHex[(c >> shift) & 0xF];
  };
  std::string out(1, quote);
  for (char32_t c : Decode(s)) {
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      out += "\\x";
      hex(out, c, 2);
    } else if (c < 0x7F || IsPrintable(c)) {
      AppendUtf8(c, out);
    } else if (c <= 0xFF) {
      out += "\\x";
      hex(out, c, 2);
    } else if (c <= 0xFFFF) {
      out += "\\u";
      hex(out, c, 4);
    } else {
      out += "\\U";
      hex(out, c, 8);
    }
  }
  out += quote;
  return out;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buffer[64];
  auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, d, std::chars_format::scientific);
  std::string_view text(buffer, end - buffer);  // "-1.2345e+17"
  std::string sign;
  if (!text.empty() && text[0] == '-') {
    sign = "-";
    text.remove_prefix(1);
  }
  size_t e = text.find('e');
  std::string digits;
  for (char c : text.substr(0, e)) {
    if (c != '.') digits += c;
  }
  int exponent = 0;
  std::from_chars(text.data() + e + 1 + (text[e + 1] == '+'), text.data() + text.size(), exponent);
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  const int n = static_cast<int>(digits.size());
  std::string out = sign;
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    out += exponent < 0 ? '-' : '+';
    int magnitude = std::abs(exponent);
    if (magnitude < 10) out += '0';
    out += std::to_string(magnitude);
  } else if (decpt <= 0) {
    out += "0.";
    out.append(-decpt, '0');
    out += digits;
  } else if (decpt >= n) {
    out += digits;
    out.append(decpt - n, '0');
    out += ".0";
  } else {
    out += digits.substr(0, decpt);
    out += '.';
    out += digits.substr(decpt);
  }
  return out;
}

}  // namespace pdserve::jinja::py
