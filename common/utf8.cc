#include "common/utf8.h"

#include <cstdint>

namespace pdserve {
namespace {

// Looks at the sequence starting at text[pos]. Returns how many bytes form the longest prefix
// of a well-formed sequence (at least 1 for a bad lead byte), and whether that prefix is a
// whole sequence (`complete`) or was cut by the end of text (`truncated`).
struct SequenceScan {
  size_t length;
  bool complete;
  bool truncated;
};

SequenceScan ScanSequence(std::string_view text, size_t pos) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(text[i]); };
  uint8_t lead = byte(pos);
  if (lead < 0x80) return {1, true, false};
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  } else {
    return {1, false, false};
  }
  for (size_t k = 1; k < need; ++k) {
    if (pos + k >= text.size()) return {k, false, true};
    uint8_t b = byte(pos + k);
    bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return {k, false, false};
  }
  return {need, true, false};
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  if (pos >= text.size()) return 0;
  SequenceScan scan = ScanSequence(text, pos);
  return scan.complete ? scan.length : 0;
}

std::optional<size_t> FindInvalidUtf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    // ASCII fast path.
    if (static_cast<uint8_t>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    size_t n = Utf8SequenceLength(text, pos);
    if (n == 0) return pos;
    pos += n;
  }
  return std::nullopt;
}

size_t IncompleteUtf8Suffix(std::string_view bytes) {
  // A truncated sequence starts at most 3 bytes before the end.
  size_t start = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t pos = start; pos < bytes.size(); ++pos) {
    uint8_t b = static_cast<uint8_t>(bytes[pos]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte cannot start a sequence
    SequenceScan scan = ScanSequence(bytes, pos);
    if (scan.truncated) return bytes.size() - pos;
  }
  return 0;
}

void AppendUtf8Lossy(std::string_view bytes, std::string& out) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  size_t pos = 0;
  while (pos < bytes.size()) {
    size_t run = pos;
    while (run < bytes.size() && static_cast<uint8_t>(bytes[run]) < 0x80) ++run;
    out.append(bytes.substr(pos, run - pos));
    pos = run;
    if (pos >= bytes.size()) break;
    SequenceScan scan = ScanSequence(bytes, pos);
    if (scan.complete) {
      out.append(bytes.substr(pos, scan.length));
    } else {
      out.append(kReplacement);
    }
    pos += scan.length;
  }
}

}  // namespace pdserve
