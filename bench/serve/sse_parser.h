// Incremental parsing of an OpenAI-style streamed response: bytes of a text/event-stream body in,
// events out (SseParser), and the JSON of one `data:` payload read into what the load generator
// needs (ParseStreamChunk). Follows the SSE spec where servers use it: lines end in \n, \r\n or
// \r; `:` starts a comment (keep-alive pings); several `data:` lines of one event join with \n;
// a blank line ends the event. Input may be split anywhere. Not thread-safe: one per stream.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pdserve::bench {

struct SseEvent {
  std::string event;  // the `event:` field, empty when absent
  std::string data;   // `data:` lines joined with \n
};

class SseParser {
 public:
  // Bounds the bytes of one event so a server that never ends a line cannot grow memory.
  explicit SseParser(size_t max_event_bytes = 16 << 20) : max_event_bytes_(max_event_bytes) {}

  // Feeds bytes; calls on_event for each completed event. Returns an error (and stays failed)
  // when an event passes the size bound.
  Status Feed(std::string_view bytes, const std::function<void(SseEvent&)>& on_event);
  // Ends the stream: a final event without the blank line is delivered (servers that close
  // right after `data: [DONE]\n`).
  void Finish(const std::function<void(SseEvent&)>& on_event);

 private:
  void ProcessLine(std::string_view line, const std::function<void(SseEvent&)>& on_event);

  size_t max_event_bytes_;
  std::string line_;
  bool last_was_cr_ = false;
  bool has_data_ = false;
  SseEvent pending_;
};

// One `data:` payload of an OpenAI completions or chat completions stream.
struct StreamChunk {
  bool done = false;        // the payload was [DONE]
  bool has_choice = false;  // carried a non-empty `choices` array (a token chunk)
  std::string text;         // choices[0].text or choices[0].delta.content (+ reasoning_content)
  std::optional<int64_t> prompt_tokens;      // usage.prompt_tokens
  std::optional<int64_t> completion_tokens;  // usage.completion_tokens
  std::optional<std::string> error;          // an `error` object's message: the stream failed
};

// Never throws; malformed JSON or a non-object payload is an InvalidArgument.
Result<StreamChunk> ParseStreamChunk(std::string_view data);

// The message of an OpenAI error body ({"error":{"message":...}}), else the body itself trimmed
// to `max_len` bytes.
std::string ErrorMessageFromBody(std::string_view body, size_t max_len = 512);

}  // namespace pdserve::bench
