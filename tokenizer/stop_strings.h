// StopStringMatcher: applies OpenAI-style `stop` strings to streamed text. Text that might be
// the start of a stop string is held back until it is known not to be; when a stop string
// completes, the text before it is released and the rest is dropped. One per sequence; not
// thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pdserve::tokenizer {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stops);

  // Appends newly decoded text; returns the text that is safe to emit now.
  std::string Push(std::string_view text);
  // True once a stop string has been seen; later Push calls return nothing.
  bool stopped() const { return stopped_; }
  // At the end of the sequence: the held-back text (empty after a stop).
  std::string Flush();

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace pdserve::tokenizer
