#include "tokenizer/byte_level.h"

#include <array>

namespace pdserve::tokenizer {
namespace {

// GPT-2's bytes_to_unicode(): the code point that stands for each byte value.
constexpr std::array<char32_t, 256> MakeByteToCodePoint() {
  std::array<char32_t, 256> table{};
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) table[b] = printable(b) ? static_cast<char32_t>(b) : next++;
  return table;
}

struct SymbolTables {
  std::array<std::string, 256> byte_to_symbol;  // UTF-8 spelling of each byte's symbol
  std::array<int16_t, 324> code_point_to_byte;  // -1 where a code point is no symbol
  SymbolTables() {
    code_point_to_byte.fill(-1);
    constexpr auto kMap = MakeByteToCodePoint();
    for (int b = 0; b < 256; ++b) {
      char32_t cp = kMap[b];
      std::string& s = byte_to_symbol[b];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
      code_point_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const SymbolTables& Tables() {
  static const SymbolTables tables;
  return tables;
}

}  // namespace

std::string_view ByteToSymbol(uint8_t byte) { return Tables().byte_to_symbol[byte]; }

std::optional<std::string> SymbolsToBytes(std::string_view symbols) {
  const auto& table = Tables().code_point_to_byte;
  std::string out;
  out.reserve(symbols.size());
  size_t i = 0;
  while (i < symbols.size()) {
    uint8_t c = static_cast<uint8_t>(symbols[i]);
    char32_t cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < symbols.size()) {
      cp = (static_cast<char32_t>(c & 0x1F) << 6) | (static_cast<uint8_t>(symbols[i + 1]) & 0x3F);
      i += 2;
    } else {
      return std::nullopt;  // symbols are all below U+0800
    }
    if (cp >= table.size() || table[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(table[cp]));
  }
  return out;
}

std::string BytesToSymbols(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += ByteToSymbol(static_cast<uint8_t>(c));
  return out;
}

}  // namespace pdserve::tokenizer
