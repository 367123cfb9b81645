// Fuzz target: an external upstream's non-200 answer (gateway/upstream_protocol.h) mapped to the
// client's error, for any body and status. Its streamed and whole 200 answers are read by
// common/openai_stream_chunk.h, fuzzed by sse_fuzz.cc.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "gateway/upstream_protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte chooses the status; the rest is the body.
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string_view body = input.substr(1);
  const int status = 100 + static_cast<uint8_t>(input[0]) * 2;
  const pdserve::gateway::ApiError e = pdserve::gateway::UpstreamError("fuzz", status, body);
  if (e.http_status != 400 && e.http_status != 429 && e.http_status != 502) abort();
  return 0;
}
