// GrammarMatcher: where a text stands in a JsonGrammar, fed byte by byte. Its state is a set of
// stacks of frames (one frame per open value: the node and how far into it the text is), more
// than one where the grammar cannot yet tell which alternative (anyOf, or an object's optional
// properties that begin alike) the text follows. The stacks share their lower frames in an arena.
// Besides Advance, it computes which tokens of a vocabulary may come next (FillMask): a walk of
// the tokens in byte order that feeds each byte once for the prefix tokens share, and skips every
// token behind a prefix the grammar refuses. A matcher belongs to one sequence and one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/json_grammar.h"
#include "grammar/token_vocabulary.h"

namespace pdserve::grammar {

// One open value: the node, a state within it and two numbers whose meaning the node's kind sets
// (an object's property index and a key's byte, an array's item count, a literal set's range).
struct Frame {
  int32_t node = 0;
  int32_t state = 0;
  int32_t a = 0;
  int32_t b = 0;
};

// A number's parts are bounded so that it parses to a finite double, and an integer to an exact
// one (below 2^53), in any JSON reader, where JSON's grammar alone admits 1e99999.
inline constexpr int32_t kMaxIntegerDigits = 15;
inline constexpr int32_t kMaxFractionDigits = 15;
inline constexpr int32_t kMaxExponentDigits = 2;

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const JsonGrammar> grammar);

  // Feeds `bytes`; false, with the state unchanged, when the grammar does not admit them here.
  bool Advance(std::string_view bytes);
  // The text so far is one whole value (it may still go on: a number takes more digits).
  bool IsComplete() const;
  // The text is complete and no byte may follow.
  bool IsTerminated() const;
  // Sets in `mask` the tokens of `vocabulary` whose bytes the grammar admits next (not the end
  // tokens: the caller adds those where IsComplete()). The state is unchanged.
  void FillMask(const TokenVocabulary& vocabulary, TokenMask* mask);
  // Equal keys admit the same continuations: the masks' cache key.
  std::string StateKey() const;
  const JsonGrammar& grammar() const { return *grammar_; }

 private:
  struct Entry {
    Frame frame;
    int32_t parent = -1;  // the frame below, or -1 for the root value
  };
  static constexpr int32_t kAccepted = -2;  // a stack whose root value is complete

  int32_t Push(const Frame& frame, int32_t parent);
  // The stacks after `top` reads `byte`, appended to `out`.
  void Feed(int32_t top, uint8_t byte, std::vector<int32_t>* out);
  // Pushes `node`'s start frames on `parent` (one per alternative of an anyOf), into `out`.
  void PushValue(int32_t parent, int32_t node, std::vector<int32_t>* out);
  // What is on top once the top frame's value is complete.
  int32_t Pop(int32_t top) const;
  // Pushes `node`'s start frames on `parent` and feeds them `byte`.
  void PushAndFeed(int32_t parent, int32_t node, uint8_t byte, std::vector<int32_t>* out);
  void FeedString(int32_t top, const Frame& f, uint8_t byte, std::vector<int32_t>* out);
  void FeedNumber(int32_t top, const Frame& f, bool integer, uint8_t byte,
                  std::vector<int32_t>* out);
  void FeedLiterals(int32_t top, const Frame& f, uint8_t byte, std::vector<int32_t>* out);
  void FeedObject(int32_t top, const Frame& f, uint8_t byte, std::vector<int32_t>* out);
  void FeedAnyObject(int32_t top, const Frame& f, uint8_t byte, std::vector<int32_t>* out);
  void FeedArray(int32_t top, const Frame& f, uint8_t byte, std::vector<int32_t>* out);
  // Whether the frame's value may end here without another byte (a number, a literal).
  bool FrameMayEnd(const Frame& f) const;
  // `tops` after one byte, duplicates removed.
  void Step(const std::vector<int32_t>& tops, uint8_t byte, std::vector<int32_t>* out);
  void Dedupe(std::vector<int32_t>* tops) const;
  // Keeps only the entries the current tops reach.
  void Compact();

  std::shared_ptr<const JsonGrammar> grammar_;
  std::vector<Entry> arena_;
  std::vector<int32_t> tops_;
  std::vector<int32_t> scratch_;
  std::vector<std::vector<int32_t>> levels_;  // FillMask's stacks after each byte of a token
};

}  // namespace pdserve::grammar
