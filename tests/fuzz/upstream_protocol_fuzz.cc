// Fuzz target: what an external upstream sends back (gateway/upstream_protocol.h): its SSE body
// split into events by common/sse_parser.h, each event's data read as a stream chunk, the whole
// body read as a response and as an error answer. The events must not depend on where the body was
// split into reads.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "common/sse_parser.h"
#include "gateway/upstream_protocol.h"

namespace {

struct Parsed {
  std::vector<std::string> data;
  bool failed = false;
};

// Feeds `body` in pieces whose lengths come from `cuts` (one byte each, cycled); none when empty.
Parsed Run(std::string_view body, std::string_view cuts) {
  Parsed out;
  pdserve::SseParser reader(/*max_event_bytes=*/4096);
  auto on_data = [&](pdserve::SseEvent& e) {
    out.data.emplace_back(e.data);
    (void)pdserve::gateway::ParseUpstreamChunk(e.data);
  };
  size_t at = 0;
  for (size_t i = 0; at < body.size(); ++i) {
    const size_t n = cuts.empty() ? body.size() : 1 + static_cast<uint8_t>(cuts[i % cuts.size()]);
    const auto piece = body.substr(at, n);
    at += piece.size();
    if (!reader.Feed(piece, on_data).ok()) {
      out.failed = true;
      return out;
    }
  }
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
  if (!whole.failed && whole.data != split.data) abort();

  (void)pdserve::gateway::ParseUpstreamResponse(body);
  const int status = 100 + static_cast<uint8_t>(input[0]) * 2;
  const pdserve::gateway::ApiError e = pdserve::gateway::UpstreamError("fuzz", status, body);
  if (e.http_status != 400 && e.http_status != 429 && e.http_status != 502) abort();
  return 0;
}
