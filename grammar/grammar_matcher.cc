#include "grammar/grammar_matcher.h"

#include <algorithm>
#include <cstring>
#include <tuple>
#include <unordered_map>

namespace pdserve::grammar {

namespace {

// String states. kUtf8* wait for the continuation bytes of a multi-byte character, with the
// narrower ranges RFC 3629 sets after E0, ED, F0 and F4 (no overlong forms, no surrogates).
enum StringState : int32_t {
  kStringStart = 0,
  kContent,
  kEscape,
  kUnicodeHex,  // b: hex digits read
  kUtf8Need1,
  kUtf8Need2,
  kUtf8Need3,
  kUtf8AfterE0,
  kUtf8AfterED,
  kUtf8AfterF0,
  kUtf8AfterF4,
};

// Number states (JSON's grammar). Accepting: kZero, kInt, kFrac, kExp.
enum NumberState : int32_t {
  kNumberStart = 0,
  kMinus,
  kZero,
  kInt,
  kDot,
  kFrac,
  kE,
  kESign,
  kExp,
};

// Digits a number's parts may have (grammar_matcher.h).
int32_t MaxDigits(int32_t state) {
  if (state == kExp) return kMaxExponentDigits;
  if (state == kFrac) return kMaxFractionDigits;
  return kMaxIntegerDigits;
}

bool NumberAccepting(int32_t s) { return s == kZero || s == kInt || s == kFrac || s == kExp; }

// Object states: a is the next property that may come (kObjectOpen, kObjectComma), the one
// whose key or value is read (kObjectKey, with b the key's bytes read; kObjectAfter).
enum ObjectState : int32_t {
  kObjectStart = 0,
  kObjectOpen,
  kObjectComma,
  kObjectKey,
  kObjectAfter
};
enum AnyObjectState : int32_t { kAnyStart = 0, kAnyOpen, kAnyColon, kAnyAfter, kAnyComma };
// Array states: a is the items so far (capped where the bounds stop caring).
enum ArrayState : int32_t { kArrayStart = 0, kArrayOpen, kArrayAfter, kArrayComma };

bool IsHex(uint8_t c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool IsDigit(uint8_t c) { return c >= '0' && c <= '9'; }

// The next string state after `c` in content or a character's continuation; -1: refused;
// kStringStart stands for the closing quote.
int32_t StringNext(int32_t state, uint8_t c) {
  auto in = [&](uint8_t lo, uint8_t hi) { return c >= lo && c <= hi; };
  switch (state) {
    case kContent:
      if (c == '"') return kStringStart;
      if (c == '\\') return kEscape;
      if (c < 0x20) return -1;
      if (c < 0x80) return kContent;
      if (in(0xC2, 0xDF)) return kUtf8Need1;
      if (c == 0xE0) return kUtf8AfterE0;
      if (c == 0xED) return kUtf8AfterED;
      if (in(0xE1, 0xEF)) return kUtf8Need2;
      if (c == 0xF0) return kUtf8AfterF0;
      if (in(0xF1, 0xF3)) return kUtf8Need3;
      if (c == 0xF4) return kUtf8AfterF4;
      return -1;
    case kUtf8Need1:
      return in(0x80, 0xBF) ? kContent : -1;
    case kUtf8Need2:
      return in(0x80, 0xBF) ? kUtf8Need1 : -1;
    case kUtf8Need3:
      return in(0x80, 0xBF) ? kUtf8Need2 : -1;
    case kUtf8AfterE0:
      return in(0xA0, 0xBF) ? kUtf8Need1 : -1;
    case kUtf8AfterED:
      return in(0x80, 0x9F) ? kUtf8Need1 : -1;
    case kUtf8AfterF0:
      return in(0x90, 0xBF) ? kUtf8Need2 : -1;
    case kUtf8AfterF4:
      return in(0x80, 0x8F) ? kUtf8Need2 : -1;
    default:
      return -1;
  }
}

int32_t NumberNext(int32_t state, bool integer, uint8_t c) {
  switch (state) {
    case kNumberStart:
      if (c == '-') return kMinus;
      [[fallthrough]];
    case kMinus:
      if (c == '0') return kZero;
      if (c >= '1' && c <= '9') return kInt;
      return -1;
    case kZero:
    case kInt:
      if (state == kInt && IsDigit(c)) return kInt;
      if (integer) return -1;
      if (c == '.') return kDot;
      if (c == 'e' || c == 'E') return kE;
      return -1;
    case kDot:
      return IsDigit(c) ? kFrac : -1;
    case kFrac:
      if (IsDigit(c)) return kFrac;
      if (c == 'e' || c == 'E') return kE;
      return -1;
    case kE:
      if (c == '+' || c == '-') return kESign;
      [[fallthrough]];
    case kESign:
      return IsDigit(c) ? kExp : -1;
    case kExp:
      return IsDigit(c) ? kExp : -1;
    default:
      return -1;
  }
}

}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const JsonGrammar> grammar)
    : grammar_(std::move(grammar)) {
  PushValue(-1, grammar_->root(), &tops_);
  Dedupe(&tops_);
}

int32_t GrammarMatcher::Push(const Frame& frame, int32_t parent) {
  arena_.push_back({frame, parent});
  return static_cast<int32_t>(arena_.size() - 1);
}

int32_t GrammarMatcher::Pop(int32_t top) const {
  int32_t parent = arena_[static_cast<size_t>(top)].parent;
  // A sequence whose last part this was is complete too.
  while (parent >= 0) {
    const Frame& f = arena_[static_cast<size_t>(parent)].frame;
    const Node& n = grammar_->node(f.node);
    if (n.kind != NodeKind::kSequence || f.state < static_cast<int32_t>(n.alternatives.size())) {
      break;
    }
    parent = arena_[static_cast<size_t>(parent)].parent;
  }
  return parent < 0 ? kAccepted : parent;
}

void GrammarMatcher::PushValue(int32_t parent, int32_t node, std::vector<int32_t>* out) {
  const Node& n = grammar_->node(node);
  if (n.kind == NodeKind::kAnyOf) {
    for (int32_t alt : n.alternatives) PushValue(parent, alt, out);
    return;
  }
  Frame f{node, 0, 0, 0};
  if (n.kind == NodeKind::kLiterals) f.b = static_cast<int32_t>(n.literals.size());
  out->push_back(Push(f, parent));
}

void GrammarMatcher::PushAndFeed(int32_t parent, int32_t node, uint8_t byte,
                                 std::vector<int32_t>* out) {
  const size_t from = scratch_.size();
  PushValue(parent, node, &scratch_);
  const size_t to = scratch_.size();
  for (size_t i = from; i < to; ++i) Feed(scratch_[i], byte, out);
  scratch_.resize(from);
}

void GrammarMatcher::Feed(int32_t top, uint8_t byte, std::vector<int32_t>* out) {
  if (top == kAccepted) return;  // nothing follows a complete root value
  const Frame f = arena_[static_cast<size_t>(top)].frame;
  switch (grammar_->node(f.node).kind) {
    case NodeKind::kString:
      return FeedString(top, f, byte, out);
    case NodeKind::kNumber:
      return FeedNumber(top, f, /*integer=*/false, byte, out);
    case NodeKind::kInteger:
      return FeedNumber(top, f, /*integer=*/true, byte, out);
    case NodeKind::kLiterals:
      return FeedLiterals(top, f, byte, out);
    case NodeKind::kObject:
      return FeedObject(top, f, byte, out);
    case NodeKind::kAnyObject:
      return FeedAnyObject(top, f, byte, out);
    case NodeKind::kArray:
      return FeedArray(top, f, byte, out);
    case NodeKind::kSequence: {
      // a: none; state: the part to read next (a complete sequence is popped, never a top).
      const Node& n = grammar_->node(f.node);
      if (f.state >= static_cast<int32_t>(n.alternatives.size())) return;
      const int32_t parent = arena_[static_cast<size_t>(top)].parent;
      PushAndFeed(Push({f.node, f.state + 1, 0, 0}, parent),
                  n.alternatives[static_cast<size_t>(f.state)], byte, out);
      return;
    }
    case NodeKind::kAnyOf:
      return;  // expanded when pushed; never a frame
  }
}

void GrammarMatcher::FeedString(int32_t top, const Frame& f, uint8_t byte,
                                std::vector<int32_t>* out) {
  const int32_t parent = arena_[static_cast<size_t>(top)].parent;
  // a: characters so far (code points, an escape one), counted only as far as the node's
  // minLength and maxLength care (an unbounded string's stays 0, one state for all its text).
  const Node& n = grammar_->node(f.node);
  const int32_t counted = std::min(f.a + 1, std::max(n.min_items, n.max_items));
  const bool room = n.max_items < 0 || f.a < n.max_items;  // another character may start
  auto push = [&](int32_t state, int32_t chars, int32_t hex) {
    out->push_back(Push({f.node, state, chars, hex}, parent));
  };
  switch (f.state) {
    case kStringStart:
      if (byte == '"') push(kContent, 0, 0);
      return;
    case kEscape:
      if (byte == 'u') {
        push(kUnicodeHex, f.a, 0);
      } else if (std::strchr("\"\\/bfnrt", byte) != nullptr && byte != 0) {
        push(kContent, counted, 0);
      }
      return;
    case kUnicodeHex:
      // b: hex digits read. A first digit d would start a surrogate (D800-DFFF), which only a
      // pair makes valid: refused, so an escape always names a whole character (such text is
      // written as UTF-8).
      if (!IsHex(byte) || (f.b == 0 && (byte == 'd' || byte == 'D'))) return;
      if (f.b == 3) {
        push(kContent, counted, 0);
      } else {
        push(kUnicodeHex, f.a, f.b + 1);
      }
      return;
    case kContent:
      if (byte == '"') {
        if (f.a >= n.min_items) out->push_back(Pop(top));
        return;
      }
      if (!room) return;
      [[fallthrough]];
    default: {
      const int32_t next = StringNext(f.state, byte);
      if (next < 0) return;
      // A character is counted when it is whole: an ASCII byte, a multi-byte one's last byte.
      push(next, next == kContent ? counted : f.a, 0);
    }
  }
}

void GrammarMatcher::FeedNumber(int32_t top, const Frame& f, bool integer, uint8_t byte,
                                std::vector<int32_t>* out) {
  int32_t next = NumberNext(f.state, integer, byte);
  // a: the digits of the current part (integer, fraction, exponent), within its bound.
  const int32_t digits = !IsDigit(byte) ? 0 : next == f.state ? f.a + 1 : 1;
  if (next >= 0 && digits > MaxDigits(next)) next = -1;
  if (next >= 0) {
    out->push_back(Push({f.node, next, digits, 0}, arena_[static_cast<size_t>(top)].parent));
  }
  // A complete number ends where a byte cannot extend it: the byte is its parent's.
  if (NumberAccepting(f.state)) {
    const int32_t parent = Pop(top);
    if (parent != kAccepted) Feed(parent, byte, out);
  }
}

void GrammarMatcher::FeedLiterals(int32_t top, const Frame& f, uint8_t byte,
                                  std::vector<int32_t>* out) {
  const std::vector<std::string>& lits = grammar_->node(f.node).literals;
  const size_t pos = static_cast<size_t>(f.state);
  int32_t lo = f.a;
  // Sorted, so a literal that is exactly the bytes read so far is the range's first.
  if (lits[static_cast<size_t>(lo)].size() == pos) {
    const int32_t parent = Pop(top);
    if (parent != kAccepted) Feed(parent, byte, out);
    ++lo;
  }
  // The range's literals share their first pos bytes and are sorted: those with `byte` next
  // are a range too.
  auto byte_at = [&](int32_t i) { return static_cast<uint8_t>(lits[static_cast<size_t>(i)][pos]); };
  int32_t first = lo, last = f.b;
  while (first < last && byte_at(first) < byte) ++first;
  int32_t end = first;
  while (end < last && byte_at(end) == byte) ++end;
  if (first == end) return;
  const int32_t parent = arena_[static_cast<size_t>(top)].parent;
  if (end - first == 1 && lits[static_cast<size_t>(first)].size() == pos + 1) {
    out->push_back(Pop(top));  // the one literal left is whole: nothing more can be read
    return;
  }
  out->push_back(Push({f.node, static_cast<int32_t>(pos + 1), first, end}, parent));
}

void GrammarMatcher::FeedObject(int32_t top, const Frame& f, uint8_t byte,
                                std::vector<int32_t>* out) {
  const Node& n = grammar_->node(f.node);
  const int32_t count = static_cast<int32_t>(n.properties.size());
  const int32_t parent = arena_[static_cast<size_t>(top)].parent;
  auto none_required_from = [&](int32_t i) {
    return n.first_required_from[static_cast<size_t>(std::min(i, count))] == count;
  };
  switch (f.state) {
    case kObjectStart:
      if (byte == '{') out->push_back(Push({f.node, kObjectOpen, 0, 0}, parent));
      return;
    case kObjectOpen:
    case kObjectComma:
      if (byte == '}' && f.state == kObjectOpen && none_required_from(f.a)) {
        out->push_back(Pop(top));
        return;
      }
      if (byte != '"') return;
      // Any property from a on, up to the first required one: those between are skipped.
      for (int32_t k = f.a; k < count; ++k) {
        out->push_back(Push({f.node, kObjectKey, k, 1}, parent));
        if (n.properties[static_cast<size_t>(k)].required) break;
      }
      return;
    case kObjectKey: {
      const Property& p = n.properties[static_cast<size_t>(f.a)];
      if (static_cast<uint8_t>(p.key[static_cast<size_t>(f.b)]) != byte) return;
      if (static_cast<size_t>(f.b) + 1 < p.key.size()) {
        out->push_back(Push({f.node, kObjectKey, f.a, f.b + 1}, parent));
        return;
      }
      PushValue(Push({f.node, kObjectAfter, f.a, 0}, parent), p.value, out);
      return;
    }
    case kObjectAfter:
      if (byte == ',' && f.a + 1 < count) {
        out->push_back(Push({f.node, kObjectComma, f.a + 1, 0}, parent));
      } else if (byte == '}' && none_required_from(f.a + 1)) {
        out->push_back(Pop(top));
      }
      return;
    default:
      return;
  }
}

void GrammarMatcher::FeedAnyObject(int32_t top, const Frame& f, uint8_t byte,
                                   std::vector<int32_t>* out) {
  const Node& n = grammar_->node(f.node);
  const int32_t parent = arena_[static_cast<size_t>(top)].parent;
  switch (f.state) {
    case kAnyStart:
      if (byte == '{') out->push_back(Push({f.node, kAnyOpen, 0, 0}, parent));
      return;
    case kAnyOpen:
    case kAnyComma:
      if (byte == '}' && f.state == kAnyOpen) {
        out->push_back(Pop(top));
      } else if (byte == '"') {
        // The key: a string frame already past its opening quote.
        out->push_back(Push({n.keys, kContent, 0, 0}, Push({f.node, kAnyColon, 0, 0}, parent)));
      }
      return;
    case kAnyColon:
      if (byte == ':') PushValue(Push({f.node, kAnyAfter, 0, 0}, parent), n.items, out);
      return;
    case kAnyAfter:
      if (byte == ',') {
        out->push_back(Push({f.node, kAnyComma, 0, 0}, parent));
      } else if (byte == '}') {
        out->push_back(Pop(top));
      }
      return;
    default:
      return;
  }
}

void GrammarMatcher::FeedArray(int32_t top, const Frame& f, uint8_t byte,
                               std::vector<int32_t>* out) {
  const Node& n = grammar_->node(f.node);
  const int32_t parent = arena_[static_cast<size_t>(top)].parent;
  // Counts past this change nothing: min_items is met and max_items (if any) is the cap.
  const int32_t cap = std::max(n.min_items, n.max_items);
  auto item = [&](int32_t so_far) {
    PushAndFeed(Push({f.node, kArrayAfter, std::min(so_far + 1, cap), 0}, parent), n.items, byte,
                out);
  };
  switch (f.state) {
    case kArrayStart:
      if (byte == '[') out->push_back(Push({f.node, kArrayOpen, 0, 0}, parent));
      return;
    case kArrayOpen:
      if (byte == ']') {
        if (n.min_items == 0) out->push_back(Pop(top));
        return;
      }
      if (n.max_items != 0) item(0);
      return;
    case kArrayAfter:
      if (byte == ',' && (n.max_items < 0 || f.a < n.max_items)) {
        out->push_back(Push({f.node, kArrayComma, f.a, 0}, parent));
      } else if (byte == ']' && f.a >= n.min_items) {
        out->push_back(Pop(top));
      }
      return;
    case kArrayComma:
      item(f.a);
      return;
    default:
      return;
  }
}

bool GrammarMatcher::FrameMayEnd(const Frame& f) const {
  const Node& n = grammar_->node(f.node);
  if (n.kind == NodeKind::kNumber || n.kind == NodeKind::kInteger) return NumberAccepting(f.state);
  if (n.kind == NodeKind::kLiterals) {
    return n.literals[static_cast<size_t>(f.a)].size() == static_cast<size_t>(f.state);
  }
  return false;
}

void GrammarMatcher::Dedupe(std::vector<int32_t>* tops) const {
  if (tops->size() < 2) return;
  auto key = [&](int32_t t) {
    if (t == kAccepted) return std::make_tuple(-1, -1, -1, -1, -1);
    const Entry& e = arena_[static_cast<size_t>(t)];
    return std::make_tuple(e.frame.node, e.frame.state, e.frame.a, e.frame.b, e.parent);
  };
  std::sort(tops->begin(), tops->end(), [&](int32_t x, int32_t y) { return key(x) < key(y); });
  tops->erase(std::unique(tops->begin(), tops->end(),
                          [&](int32_t x, int32_t y) { return key(x) == key(y); }),
              tops->end());
}

void GrammarMatcher::Step(const std::vector<int32_t>& tops, uint8_t byte,
                          std::vector<int32_t>* out) {
  out->clear();
  for (int32_t t : tops) Feed(t, byte, out);
  Dedupe(out);
}

bool GrammarMatcher::Advance(std::string_view bytes) {
  const size_t base = arena_.size();
  std::vector<int32_t> current = tops_, next;
  for (char c : bytes) {
    Step(current, static_cast<uint8_t>(c), &next);
    if (next.empty()) {
      arena_.resize(base);
      return false;
    }
    current.swap(next);
  }
  tops_ = std::move(current);
  Compact();
  return true;
}

bool GrammarMatcher::IsComplete() const {
  return std::any_of(tops_.begin(), tops_.end(), [&](int32_t t) {
    if (t == kAccepted) return true;
    return FrameMayEnd(arena_[static_cast<size_t>(t)].frame) && Pop(t) == kAccepted;
  });
}

bool GrammarMatcher::IsTerminated() const {
  return std::all_of(tops_.begin(), tops_.end(), [](int32_t t) { return t == kAccepted; });
}

void GrammarMatcher::FillMask(const TokenVocabulary& vocabulary, TokenMask* mask) {
  mask->Reset(vocabulary.size());
  const size_t base = arena_.size();
  levels_.resize(vocabulary.longest() + 1);
  levels_[0] = tops_;
  const std::vector<int32_t>& sorted = vocabulary.sorted();
  const std::vector<int32_t>& shared = vocabulary.shared_prefix();
  size_t valid = 0;  // levels_[0..valid] hold the stacks after the current prefix's bytes
  size_t i = 0;
  while (i < sorted.size()) {
    const std::string& t = vocabulary.bytes(sorted[i]);
    size_t depth = std::min(static_cast<size_t>(shared[i]), valid);
    bool refused = false;
    while (depth < t.size()) {
      Step(levels_[depth], static_cast<uint8_t>(t[depth]), &levels_[depth + 1]);
      if (levels_[depth + 1].empty()) {
        refused = true;
        break;
      }
      ++depth;
    }
    if (!refused) {
      mask->Allow(sorted[i]);
      valid = t.size();
      ++i;
      continue;
    }
    // t's first depth + 1 bytes are refused: so is every token after it that starts with them.
    valid = depth;
    ++i;
    while (i < sorted.size() && static_cast<size_t>(shared[i]) > depth) ++i;
  }
  arena_.resize(base);
}

std::string GrammarMatcher::StateKey() const {
  std::vector<std::string> stacks;
  for (int32_t t : tops_) {
    std::string s;
    if (t == kAccepted) {
      s = "A";
    } else {
      for (int32_t at = t; at >= 0; at = arena_[static_cast<size_t>(at)].parent) {
        const Frame& f = arena_[static_cast<size_t>(at)].frame;
        s.append(reinterpret_cast<const char*>(&f), sizeof(f));
      }
    }
    stacks.push_back(std::move(s));
  }
  std::sort(stacks.begin(), stacks.end());
  std::string key;
  for (const auto& s : stacks) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    key.append(reinterpret_cast<const char*>(&n), sizeof(n));
    key += s;
  }
  return key;
}

void GrammarMatcher::Compact() {
  std::vector<Entry> kept;
  std::unordered_map<int32_t, int32_t> moved;
  // Copies an entry and the ones below it, each once.
  auto copy = [&](auto&& self, int32_t at) -> int32_t {
    if (at < 0) return at;
    if (auto it = moved.find(at); it != moved.end()) return it->second;
    const Entry e = arena_[static_cast<size_t>(at)];
    const int32_t parent = self(self, e.parent);
    kept.push_back({e.frame, parent});
    const int32_t now = static_cast<int32_t>(kept.size() - 1);
    moved[at] = now;
    return now;
  };
  for (int32_t& t : tops_) t = copy(copy, t);
  arena_ = std::move(kept);
}

}  // namespace pdserve::grammar
