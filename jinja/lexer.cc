#include "jinja/lexer.h"

#include <cstdlib>

#include "common/utf8.h"
#include "jinja/python_str.h"

namespace pdserve::jinja {
namespace {

constexpr std::string_view kOperators[] = {
    "//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
    "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";",
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsNameStart(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool IsNameChar(char c) { return IsNameStart(c) || IsDigit(c); }

// Jinja2 normalises line endings to "\n" and drops one trailing newline.
std::string NormalizeNewlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(std::string_view source, std::string_view origin)
      : source_(NormalizeNewlines(source)), origin_(origin) {}

  Result<std::vector<Token>> Run() {
    while (pos_ < source_.size()) {
      PDSERVE_RETURN_IF_ERROR(LexRoot());
    }
    Emit(TokenType::kEof, source_.size());
    return std::move(tokens_);
  }

 private:
  Status Error(size_t at, const std::string& message) {
    return InvalidArgument(std::string(origin_) + ":" + std::to_string(LineAt(at)) + ": " +
                           message);
  }

  int LineAt(size_t at) {
    while (line_pos_ < at && line_pos_ < source_.size()) {
      if (source_[line_pos_] == '\n') ++line_;
      ++line_pos_;
    }
    return line_;
  }

  Token& Emit(TokenType type, size_t at, std::string value = {}) {
    Token token;
    token.type = type;
    token.value = std::move(value);
    token.line = LineAt(at);
    tokens_.push_back(std::move(token));
    return tokens_.back();
  }

  // Length of Python whitespace (\s) starting at `at`.
  size_t WhitespaceLength(size_t at) const {
    size_t i = at;
    while (i < source_.size()) {
      size_t n = Utf8SequenceLength(source_, i);
      if (n == 0) break;
      std::u32string c = py::Decode(std::string_view(source_).substr(i, n));
      if (c.empty() || !py::IsSpace(c[0])) break;
      i += n;
    }
    return i - at;
  }

  bool AllWhitespace(std::string_view text) const {
    for (char32_t c : py::Decode(text)) {
      if (!py::IsSpace(c)) return false;
    }
    return true;
  }

  // Applies `{%-` and lstrip_blocks to the text before a tag and emits it.
  void EmitData(size_t begin, size_t end, char sign, bool lstrip_applies) {
    std::string text = source_.substr(begin, end - begin);
    if (sign == '-') {
      text = py::Strip(text, std::nullopt, false, true);
    } else if (sign != '+' && lstrip_applies) {
      size_t line_start = text.rfind('\n');
      line_start = line_start == std::string::npos ? 0 : line_start + 1;
      if ((line_start > 0 || line_starting_) && line_start < text.size() &&
          AllWhitespace(std::string_view(text).substr(line_start))) {
        text.resize(line_start);
      }
    }
    if (!text.empty()) Emit(TokenType::kData, begin, std::move(text));
  }

  // The end of a `%}` (trim_blocks: one newline after it goes too), `-%}` (all whitespace
  // after it goes), or `+%}`; npos when none starts at `at`. `close` is "%}", "}}" or "#}".
  size_t MatchTagEnd(size_t at, std::string_view close, bool allow_plus, bool trim) const {
    std::string_view rest = std::string_view(source_).substr(at);
    if (rest.size() > close.size() && rest[0] == '-' && rest.substr(1, close.size()) == close) {
      size_t end = at + 1 + close.size();
      return end + WhitespaceLength(end);
    }
    if (allow_plus && rest.size() > close.size() && rest[0] == '+' &&
        rest.substr(1, close.size()) == close) {
      return at + 1 + close.size();
    }
    if (rest.substr(0, close.size()) == close) {
      size_t end = at + close.size();
      if (trim && end < source_.size() && source_[end] == '\n') ++end;
      return end;
    }
    return std::string_view::npos;
  }

  void SetLineStarting(size_t match_end) {
    line_starting_ = match_end > 0 && source_[match_end - 1] == '\n';
  }

  // `{%(-|+|)\s*raw\s*(-%}\s*|%})` at `at`: the end of the match, or npos.
  size_t MatchRawBegin(size_t at) const {
    size_t i = at + 2;
    if (i < source_.size() && (source_[i] == '-' || source_[i] == '+')) ++i;
    i += WhitespaceLength(i);
    if (source_.compare(i, 3, "raw") != 0) return std::string::npos;
    i += 3;
    i += WhitespaceLength(i);
    if (source_.compare(i, 3, "-%}") == 0) return i + 3 + WhitespaceLength(i + 3);
    if (source_.compare(i, 2, "%}") == 0) return i + 2;
    return std::string::npos;
  }

  Status LexRoot() {
    size_t tag = pos_;
    while (true) {
      tag = source_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= source_.size()) {
        EmitData(pos_, source_.size(), 0, false);
        pos_ = source_.size();
        return Status::Ok();
      }
      char kind = source_[tag + 1];
      if (kind == '{' || kind == '%' || kind == '#') break;
      ++tag;
    }
    const char kind = source_[tag + 1];
    char sign = tag + 2 < source_.size() ? source_[tag + 2] : 0;
    if (sign != '-' && sign != '+') sign = 0;
    if (kind == '%') {
      if (size_t raw_end = MatchRawBegin(tag); raw_end != std::string::npos) {
        EmitData(pos_, tag, sign, true);
        SetLineStarting(raw_end);
        return LexRaw(raw_end);
      }
    }
    EmitData(pos_, tag, sign, kind != '{');
    size_t after = tag + 2 + (sign != 0);
    SetLineStarting(after);
    if (kind == '#') return LexComment(after);
    return LexTag(tag, after, kind == '%');
  }

  Status LexComment(size_t begin) {
    for (size_t close = source_.find("#}", begin); close != std::string::npos;
         close = source_.find("#}", close + 1)) {
      size_t at = close;
      if (close > begin && (source_[close - 1] == '-' || source_[close - 1] == '+')) at = close - 1;
      size_t end = MatchTagEnd(at, "#}", true, true);
      if (end == std::string::npos) continue;
      pos_ = end;
      SetLineStarting(end);
      return Status::Ok();
    }
    return Error(begin, "Missing end of comment tag");
  }

  Status LexRaw(size_t begin) {
    for (size_t open = source_.find("{%", begin); open != std::string::npos;
         open = source_.find("{%", open + 1)) {
      size_t i = open + 2;
      char sign = 0;
      if (i < source_.size() && (source_[i] == '-' || source_[i] == '+')) sign = source_[i++];
      i += WhitespaceLength(i);
      if (source_.compare(i, 6, "endraw") != 0) continue;
      i += 6;
      i += WhitespaceLength(i);
      size_t end = MatchTagEnd(i, "%}", true, true);
      if (end == std::string::npos) continue;
      EmitData(begin, open, sign, true);
      pos_ = end;
      SetLineStarting(end);
      return Status::Ok();
    }
    return Error(begin, "Missing end of raw directive");
  }

  Status LexTag(size_t tag, size_t begin, bool block) {
    Emit(block ? TokenType::kBlockBegin : TokenType::kVariableBegin, tag);
    std::string balance;  // closing brackets still expected
    size_t i = begin;
    while (i < source_.size()) {
      if (balance.empty()) {
        size_t end = block ? MatchTagEnd(i, "%}", true, true) : MatchTagEnd(i, "}}", false, false);
        if (end != std::string::npos) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, i);
          pos_ = end;
          SetLineStarting(end);
          return Status::Ok();
        }
      }
      if (size_t n = WhitespaceLength(i); n > 0) {
        i += n;
        continue;
      }
      char c = source_[i];
      size_t end = MatchFloat(i);
      if (end != std::string::npos) {
        std::string digits;
        for (size_t k = i; k < end; ++k) {
          if (source_[k] != '_') digits += source_[k];
        }
        Emit(TokenType::kFloat, i).number = std::strtod(digits.c_str(), nullptr);
        i = end;
        continue;
      }
      if (IsDigit(c)) {
        PDSERVE_RETURN_IF_ERROR(LexInteger(i));
        continue;
      }
      if (IsNameStart(c)) {
        size_t j = i;
        while (j < source_.size() && IsNameChar(source_[j])) ++j;
        Emit(TokenType::kName, i, source_.substr(i, j - i));
        i = j;
        continue;
      }
      if (c == '\'' || c == '"') {
        PDSERVE_RETURN_IF_ERROR(LexString(i));
        continue;
      }
      std::string_view op;
      for (std::string_view candidate : kOperators) {
        if (source_.compare(i, candidate.size(), candidate) == 0) {
          op = candidate;
          break;
        }
      }
      if (op.empty()) {
        size_t n = std::max<size_t>(1, Utf8SequenceLength(source_, i));
        return Error(
            i, "unexpected char " + py::Repr(source_.substr(i, n)) + " at " + std::to_string(i));
      }
      if (op == "(" || op == "[" || op == "{") {
        balance += op == "(" ? ')' : op == "[" ? ']' : '}';
      } else if (op == ")" || op == "]" || op == "}") {
        if (balance.empty()) return Error(i, "unexpected '" + std::string(op) + "'");
        if (balance.back() != op[0]) {
          return Error(i, "unexpected '" + std::string(op) + "', expected '" +
                              std::string(1, balance.back()) + "'");
        }
        balance.pop_back();
      }
      Emit(TokenType::kOperator, i, std::string(op));
      i += op.size();
    }
    pos_ = source_.size();
    return Status::Ok();  // the parser reports the unclosed tag
  }

  // `(\d+_)*\d+`: the end, or npos.
  size_t MatchDigits(size_t at) const {
    if (at >= source_.size() || !IsDigit(source_[at])) return std::string::npos;
    size_t i = at;
    while (true) {
      while (i < source_.size() && IsDigit(source_[i])) ++i;
      if (i + 1 < source_.size() && source_[i] == '_' && IsDigit(source_[i + 1])) {
        ++i;
        continue;
      }
      return i;
    }
  }

  // Jinja2's float_re at `at`: the end, or npos.
  size_t MatchFloat(size_t at) const {
    if (at > 0 && source_[at - 1] == '.') return std::string::npos;
    size_t i = MatchDigits(at);
    if (i == std::string::npos) return i;
    size_t fraction = std::string::npos;
    if (i < source_.size() && source_[i] == '.') fraction = MatchDigits(i + 1);
    size_t k = fraction != std::string::npos ? fraction : i;
    if (k < source_.size() && (source_[k] == 'e' || source_[k] == 'E')) {
      size_t e = k + 1;
      if (e < source_.size() && (source_[e] == '+' || source_[e] == '-')) ++e;
      size_t end = MatchDigits(e);
      if (end != std::string::npos) return end;
    }
    return fraction;
  }

  Status LexInteger(size_t& i) {
    int base = 10;
    size_t digits_at = i;
    char prefix = i + 1 < source_.size() ? static_cast<char>(source_[i + 1] | 0x20) : 0;
    if (source_[i] == '0' && (prefix == 'b' || prefix == 'o' || prefix == 'x')) {
      base = prefix == 'b' ? 2 : prefix == 'o' ? 8 : 16;
      digits_at = i + 2;
    }
    auto digit_value = [&](char c) {
      int d = IsDigit(c)                               ? c - '0'
              : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                       : 99;
      return d < base ? d : -1;
    };
    // `(_?DIGIT)+` after a prefix; `[1-9](_?\d)*` or `0(_?0)*` without one.
    size_t j = digits_at;
    int64_t value = 0;
    bool overflow = false, any = false;
    while (j < source_.size()) {
      size_t k = j;
      if (source_[k] == '_' && (base != 10 || any)) ++k;
      if (k >= source_.size() || digit_value(source_[k]) < 0) break;
      int d = digit_value(source_[k]);
      if (base == 10 && any && value == 0 && d != 0) break;  // "0(_?0)*" stops at a non-zero
      overflow |=
          __builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value);
      any = true;
      j = k + 1;
    }
    if (!any) {  // "0b" without binary digits: the integer is the 0
      base = 10;
      value = 0;
      j = i + 1;
    }
    if (overflow) return Error(i, "integer literal too large (the engine's integers are 64-bit)");
    Emit(TokenType::kInteger, i).integer = value;
    i = j;
    return Status::Ok();
  }

  // A quoted string with Python's escapes (after Jinja2's backslashreplace round trip).
  Status LexString(size_t& i) {
    const char quote = source_[i];
    size_t j = i + 1;
    while (j < source_.size() && source_[j] != quote) {
      j += source_[j] == '\\' ? 2 : 1;
    }
    if (j >= source_.size()) {
      return Error(
          i, "unexpected char " + py::Repr(std::string(1, quote)) + " at " + std::to_string(i));
    }
    std::u32string body = py::Decode(std::string_view(source_).substr(i + 1, j - i - 1));
    std::string value;
    auto hex_value = [&](size_t at, size_t count, char32_t& out) {
      if (at + count > body.size()) return false;
      out = 0;
      for (size_t k = at; k < at + count; ++k) {
        char32_t c = body[k];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return false;
        out = out * 16 + d;
      }
      return true;
    };
    for (size_t k = 0; k < body.size(); ++k) {
      char32_t c = body[k];
      if (c != '\\' || k + 1 >= body.size()) {
        py::AppendUtf8(c, value);
        continue;
      }
      char32_t e = body[++k];
      switch (e) {
        case '\n':
          break;
        case '\\':
        case '\'':
        case '"':
          py::AppendUtf8(e, value);
          break;
        case 'a':
          value += '\a';
          break;
        case 'b':
          value += '\b';
          break;
        case 'f':
          value += '\f';
          break;
        case 'n':
          value += '\n';
          break;
        case 'r':
          value += '\r';
          break;
        case 't':
          value += '\t';
          break;
        case 'v':
          value += '\v';
          break;
        case 'x':
        case 'u':
        case 'U': {
          size_t count = e == 'x' ? 2 : e == 'u' ? 4 : 8;
          char32_t code;
          if (!hex_value(k + 1, count, code)) {
            return Error(i, std::string("truncated \\") + static_cast<char>(e) + "XX escape");
          }
          if (code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
            return Error(i, "illegal Unicode character in a string literal");
          }
          py::AppendUtf8(code, value);
          k += count;
          break;
        }
        case 'N':
          return Error(i, "\\N{...} escapes are not supported");
        default:
          if (e >= '0' && e <= '7') {
            char32_t code = e - '0';
            for (int n = 0;
                 n < 2 && k + 1 < body.size() && body[k + 1] >= '0' && body[k + 1] <= '7'; ++n) {
              code = code * 8 + (body[++k] - '0');
            }
            py::AppendUtf8(code, value);
          } else if (e >= 0x80) {
            // Jinja2 turned the character into "\xhh" / "\uhhhh" / "\Uhhhhhhhh" first, so the
            // backslash before it escaped that escape's backslash.
            static constexpr char kHex[] = "0123456789abcdef";
            int digits = e <= 0xFF ? 2 : e <= 0xFFFF ? 4 : 8;
            value += '\\';
            value += digits == 2 ? 'x' : digits == 4 ? 'u' : 'U';
            for (int shift = (digits - 1) * 4; shift >= 0; shift -= 4)
              value += kHex[(e >> shift) & 0xF];
          } else {
            value += '\\';
            py::AppendUtf8(e, value);
          }
      }
    }
    Emit(TokenType::kString, i, std::move(value));
    i = j + 1;
    return Status::Ok();
  }

  const std::string source_;
  const std::string_view origin_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  int line_ = 1;
  size_t line_pos_ = 0;
};

}  // namespace

Result<std::vector<Token>> Tokenize(std::string_view source, std::string_view origin) {
  return Lexer(source, origin).Run();
}

}  // namespace pdserve::jinja
