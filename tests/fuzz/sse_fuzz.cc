// Fuzz target: a streamed response's bytes as a server sends them (common/sse_parser.h,
// common/openai_stream_chunk.h): the SSE parser, each event's `data:` JSON read as a completion
// chunk, and the body read as a whole response and as an error body. The events must not depend on
// where the stream was split into reads.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/openai_stream_chunk.h"
#include "common/sse_parser.h"

namespace {

using pdserve::SseEvent;
using pdserve::SseParser;

struct Parsed {
  std::vector<std::string> events;  // event name, a NUL, then the data
  bool failed = false;
};

// Feeds `body` in pieces whose lengths come from `cuts` (one byte each, cycled); none when empty.
Parsed Run(std::string_view body, std::string_view cuts) {
  Parsed out;
  SseParser parser(/*max_event_bytes=*/4096);
  auto on_event = [&](SseEvent& e) {
    out.events.push_back(e.event + '\0' + e.data);
    auto chunk = pdserve::ParseOpenAiStreamData(e.data);
    if (chunk.ok() && chunk->done && chunk->has_choice) abort();
  };
  size_t at = 0;
  for (size_t i = 0; at < body.size(); ++i) {
    const size_t n = cuts.empty() ? body.size() : 1 + static_cast<uint8_t>(cuts[i % cuts.size()]);
    const auto piece = body.substr(at, n);
    at += piece.size();
    if (!parser.Feed(piece, on_event).ok()) {
      out.failed = true;
      return out;
    }
  }
  parser.Finish(on_event);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte says how many of the next bytes choose the read sizes; the rest is the body.
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t n_cuts = std::min<size_t>(static_cast<uint8_t>(input[0]) % 8, input.size() - 1);
  const std::string_view cuts = input.substr(1, n_cuts);
  const std::string_view body = input.substr(1 + n_cuts);

  const Parsed whole = Run(body, {});
  const Parsed split = Run(body, cuts);
  // The size bound may trip at a different event when split, but never only one way round.
  if (whole.failed != split.failed) abort();
  if (!whole.failed && whole.events != split.events) abort();

  (void)pdserve::ParseOpenAiResponse(body);
  (void)pdserve::OpenAiErrorMessage(body, 64);
  return 0;
}
