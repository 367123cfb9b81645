// Incremental parsing of a text/event-stream body (server-sent events): bytes in, events out.
// Follows the SSE spec where servers use it: lines end in \n, \r\n or \r; `:` starts a comment
// (keep-alive pings); several `data:` lines of one event join with \n; a blank line ends the
// event. Input may be split anywhere. For whatever reads an OpenAI-style stream: the load
// generator (bench/serve) and the gateway's external upstreams (gateway/external_call). Not
// thread-safe: one per stream.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace pdserve {

struct SseEvent {
  std::string event;  // the `event:` field, empty when absent
  std::string data;   // `data:` lines joined with \n
};

class SseParser {
 public:
  // Bounds the bytes of one event so a server that never ends a line cannot grow memory.
  explicit SseParser(size_t max_event_bytes = 16 << 20) : max_event_bytes_(max_event_bytes) {}

  // Feeds bytes; calls on_event for each completed event. Returns an error when an event passes
  // the size bound, and stays failed: every later Feed returns an error too.
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
  bool failed_ = false;
  SseEvent pending_;
};

}  // namespace pdserve
